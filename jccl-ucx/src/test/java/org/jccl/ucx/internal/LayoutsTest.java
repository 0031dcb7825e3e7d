package org.jccl.ucx.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * The 1.13 ABI the binding writes, pinned: offsets and sizes as gcc's offsetof/sizeof gave them against Debian's
 * 1.13.1 headers (/usr/include/ucp/api/ucp.h), mask bits and enum values from the same headers, and the decoding of
 * ucs_status_ptr_t. A change here is a change of the binding's contract with every UCX it loads.
 */
class LayoutsTest {

    @Test
    void structOffsetsAndSizesAreThoseOfUcx113() {
        assertEquals(80, Layouts.UCP_PARAMS_SIZE_113);
        assertEquals(8, Layouts.PARAMS_FEATURES);
        assertEquals(72, Layouts.PARAMS_NAME);
        assertEquals(200, Layouts.WORKER_PARAMS_SIZE_113);
        assertEquals(8, Layouts.WORKER_THREAD_MODE);
        assertEquals(144, Layouts.WORKER_EVENTS);
        assertEquals(176, Layouts.WORKER_NAME);
        assertEquals(104, Layouts.EP_PARAMS_SIZE_113);
        assertEquals(8, Layouts.EP_ADDRESS);
        assertEquals(16, Layouts.EP_ERR_MODE);
        assertEquals(80, Layouts.EP_NAME);
        assertEquals(72, Layouts.REQUEST_PARAM_SIZE_113);
        assertEquals(4, Layouts.REQ_FLAGS);
        assertEquals(48, Layouts.REQ_MEMORY_TYPE);
        assertEquals(56, Layouts.REQ_RECV_INFO);
        assertEquals(64, Layouts.REQ_MEMH);
        assertEquals(16, Layouts.RECV_INFO_SIZE);
        assertEquals(8, Layouts.RECV_INFO_LENGTH);
        assertEquals(40, Layouts.MEM_MAP_PARAMS_SIZE_113);
        assertEquals(24, Layouts.MEM_FLAGS);
        assertEquals(32, Layouts.MEM_MEMORY_TYPE);
        assertEquals(24, Layouts.CTX_ATTR_MEMORY_TYPES);
        // Every struct is allocated larger than its 1.22 size (the largest growth: ucp_request_param_t to 96 B).
        for (long size : new long[] {Layouts.UCP_PARAMS_SIZE_113 + 8, Layouts.WORKER_PARAMS_SIZE_113, Layouts.EP_PARAMS_SIZE_113,
                Layouts.REQUEST_PARAM_SIZE_113 + 24, Layouts.MEM_MAP_PARAMS_SIZE_113 + 8}) {
            assertTrue(size <= Layouts.STRUCT_BYTES, size + " B does not fit");
        }
    }

    @Test
    void maskBitsAndEnumsAreThoseOfUcx113() {
        assertEquals(1, Layouts.UCP_FEATURE_TAG);
        assertEquals(2, Layouts.UCP_FEATURE_RMA);
        assertEquals(16, Layouts.UCP_FEATURE_WAKEUP);
        assertEquals(1, Layouts.UCS_THREAD_MODE_SERIALIZED);
        assertEquals(1, Layouts.UCP_ERR_HANDLING_MODE_PEER);
        assertEquals(2, Layouts.UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE);
        assertEquals(1 << 16, Layouts.UCP_OP_ATTR_FLAG_NO_IMM_CMPL);
        assertEquals(1 << 4, Layouts.UCP_OP_ATTR_FIELD_FLAGS);
        assertEquals(2, Layouts.UCP_MEM_MAP_ALLOCATE);
        assertEquals(0, Layouts.UCS_MEMORY_TYPE_HOST);
        assertEquals(1, Layouts.UCS_MEMORY_TYPE_CUDA);
    }

    @Test
    void statusPointersDecodeAsUcxDefinesThem() {
        assertFalse(Status.isError(0));
        assertFalse(Status.isRequest(0));
        long request = 0x7f12_3456_7890L;
        assertTrue(Status.isRequest(request));
        assertFalse(Status.isError(request));
        assertTrue(Status.isError(-6L)); // (uintptr_t) UCS_ERR_UNREACHABLE
        assertEquals(Status.ERR_UNREACHABLE, Status.fromPtr(-6L));
        assertTrue(Status.isError(-100L)); // UCS_ERR_LAST itself
        assertFalse(Status.isError(-101L)); // a (very high) address below (uintptr_t) UCS_ERR_LAST
        assertEquals(Status.ERR_ENDPOINT_TIMEOUT, Status.fromPtr(-80L));
        assertTrue(Status.name(-25).startsWith("UCS_ERR_CONNECTION_RESET"));
        assertTrue(Status.isPeerFailure(Status.ERR_CONNECTION_RESET));
        assertFalse(Status.isPeerFailure(Status.ERR_MESSAGE_TRUNCATED));
    }
}
