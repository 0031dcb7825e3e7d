/**
 * The runtime control plane of a communicator: a small authenticated control channel beside the
 * data transports (a star through rank 0, {@link org.jccl.internal.control.ControlPlane}) carrying
 * heartbeats ({@code JCCL_PEER_TIMEOUT}), failure notices, stall reports
 * ({@link org.jccl.internal.control.StallReport}, {@code JCCL_STALL_WARN}) and {@code jccl status}
 * answers; the per-communicator {@link org.jccl.internal.control.FlightRecorder}
 * ({@code JCCL_FLIGHT_RECORDER_SIZE}, dumped to {@code JCCL_DUMP_DIR}), byte
 * {@link org.jccl.internal.control.Counters} and the JFR {@link org.jccl.internal.control.CollectiveEvent}.
 *
 * <p>{@code ControlPlane} is the facade; its parts, one role each: {@code ControlStar} (connecting the
 * star), {@code ControlChannel} (the I/O agent), {@code FailureDetector} (liveness rules, pure logic fed
 * timestamps), {@code Supervisor} (verdicts and relays), {@code StallCollector}, {@code FlightDumps},
 * {@code StatusEndpoint}, {@code GuardBackstop} and {@code ExitHook}.
 */
package org.jccl.internal.control;
