package org.jccl.cli.perf;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.DataType;
import org.jccl.Group;
import org.jccl.ReduceOp;
import org.jccl.cuda.CudaDevice;
import org.jccl.cuda.CudaStream;
import org.jccl.cuda.DeviceBuffer;
import org.jccl.cuda.DeviceCommunicator;

/**
 * A stand-in {@link DeviceCommunicator} for testing the GPU benchmark's harness on real GPU
 * memory, independently of jccl's kernels and of NCCL: every operation waits for the stream, copies
 * the device buffers to the host, runs the collective there through {@link FakeCluster} (whose
 * in-place detection by address is kept: overlapping send and receive buffers share one host
 * copy), and copies the result back. Slow, synchronous, and exactly right, or deliberately wrong
 * with {@link FakeCluster#corruptRank}.
 */
final class StagedDeviceCluster {
    final FakeCluster host;
    private final List<CudaDevice> devices;

    StagedDeviceCluster(List<CudaDevice> devices) {
        this.devices = List.copyOf(devices);
        this.host = new FakeCluster(devices.size());
    }

    /** Rank i on devices.get(i). */
    List<DeviceCommunicator> comms() {
        List<Communicator> hostComms = host.comms();
        List<DeviceCommunicator> l = new ArrayList<>();
        for (int r = 0; r < devices.size(); r++) {
            l.add(new Comm(hostComms.get(r), devices.get(r)));
        }
        return l;
    }

    /** Host copies of a send and a receive buffer, aliased when the device buffers overlap. */
    private static final class Mirror {
        private final List<DeviceBuffer> regions = new ArrayList<>();
        private final List<MemorySegment> copies = new ArrayList<>();
        Buffer send;
        Buffer recv;

        Mirror(CudaDevice device, DeviceBuffer s, DeviceBuffer r) {
            if (s != null && r != null && overlap(s, r)) {
                long lo = Math.min(s.address(), r.address());
                long hi = Math.max(s.address() + s.byteSize(), r.address() + r.byteSize());
                MemorySegment seg = region(device, lo, hi - lo);
                send = Buffer.of(seg.asSlice(s.address() - lo, s.byteSize()), s.count(), s.type());
                recv = Buffer.of(seg.asSlice(r.address() - lo, r.byteSize()), r.count(), r.type());
            } else {
                send = s == null ? null : Buffer.of(region(device, s.address(), s.byteSize()), s.count(), s.type());
                recv = r == null ? null : Buffer.of(region(device, r.address(), r.byteSize()), r.count(), r.type());
            }
        }

        private static boolean overlap(DeviceBuffer a, DeviceBuffer b) {
            return a.address() < b.address() + Math.max(b.byteSize(), 1) && b.address() < a.address() + Math.max(a.byteSize(), 1);
        }

        private MemorySegment region(CudaDevice device, long address, long bytes) {
            // Shared by the other ranks' threads while the host collective reads it: an automatic arena.
            MemorySegment seg = Arena.ofAuto().allocate(Math.max(bytes, 1), 64).asSlice(0, bytes);
            if (bytes > 0) {
                DeviceBuffer d = DeviceBuffer.wrap(device, address, bytes, DataType.UINT8);
                d.copyTo(seg);
                regions.add(d);
                copies.add(seg);
            }
            return seg;
        }

        /** Copies every region back to the GPU and waits for the copies. */
        void writeBack(CudaDevice device) {
            for (int i = 0; i < regions.size(); i++) {
                regions.get(i).copyFrom(copies.get(i));
            }
            device.synchronize();
        }
    }

    private static final class Comm implements DeviceCommunicator {
        private final Communicator hostComm;
        private final CudaDevice device;
        private Group group;
        private int depth;
        private final List<Mirror> pendingRecvs = new ArrayList<>();

        Comm(Communicator hostComm, CudaDevice device) {
            this.hostComm = hostComm;
            this.device = device;
        }

        @Override
        public int rank() {
            return hostComm.rank();
        }

        @Override
        public int size() {
            return hostComm.size();
        }

        @Override
        public CudaDevice device() {
            return device;
        }

        @Override
        public String backend() {
            return "staged";
        }

        private interface HostOp {
            void run(Buffer send, Buffer recv);
        }

        private void staged(DeviceBuffer send, DeviceBuffer recv, CudaStream stream, HostOp op) {
            stream.synchronize();
            Mirror m = new Mirror(device, send, recv);
            op.run(m.send, m.recv);
            m.writeBack(device);
        }

        @Override
        public void allReduce(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream stream) {
            staged(send, recv, stream, (s, r) -> hostComm.allReduce(s, r, op));
        }

        @Override
        public void broadcast(DeviceBuffer send, DeviceBuffer recv, int root, CudaStream stream) {
            staged(send, recv, stream, (s, r) -> hostComm.broadcast(s, r, root));
        }

        @Override
        public void reduce(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, int root, CudaStream stream) {
            staged(send, recv, stream, (s, r) -> hostComm.reduce(s, r, op, root));
        }

        @Override
        public void allGather(DeviceBuffer send, DeviceBuffer recv, CudaStream stream) {
            staged(send, recv, stream, hostComm::allGather);
        }

        @Override
        public void reduceScatter(DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream stream) {
            staged(send, recv, stream, (s, r) -> hostComm.reduceScatter(s, r, op));
        }

        @Override
        public void allToAll(DeviceBuffer send, DeviceBuffer recv, CudaStream stream) {
            staged(send, recv, stream, hostComm::allToAll);
        }

        @Override
        public void send(DeviceBuffer buf, int peer, CudaStream stream) {
            stream.synchronize();
            Mirror m = new Mirror(device, buf, null);
            hostComm.sendAsync(m.send, peer);
        }

        @Override
        public void recv(DeviceBuffer buf, int peer, CudaStream stream) {
            stream.synchronize();
            Mirror m = new Mirror(device, null, buf);
            hostComm.recvAsync(m.recv, peer);
            pendingRecvs.add(m);
        }

        @Override
        public void groupStart() {
            if (depth++ == 0) {
                group = hostComm.group();
            }
        }

        @Override
        public void groupEnd() {
            if (--depth == 0) {
                group.close();
                for (Mirror m : pendingRecvs) {
                    m.writeBack(device);
                }
                pendingRecvs.clear();
            }
        }

        @Override
        public void abort() {
        }

        @Override
        public void close() {
        }
    }
}
