/**
 * {@code jccl status}: asks the running jccl jobs of this user on this host for their hang report
 * through each rank's local status endpoint (see org.jccl.internal.control.ControlPlane).
 */
package org.jccl.cli.status;
