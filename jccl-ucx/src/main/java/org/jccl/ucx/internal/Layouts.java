package org.jccl.ucx.internal;

/**
 * The UCX 1.13 ABI the binding writes and reads: offsets of the fields it uses in each parameter and
 * attribute struct, the field-mask bits and enum values, as compiled from Debian's 1.13.1 headers
 * ({@code /usr/include/ucp/api/ucp.h}, {@code ucp_def.h}, {@code ucs/type/status.h}) with gcc's
 * {@code offsetof}/{@code sizeof} (pinned by {@code LayoutsTest}). Every struct of 1.13 ... 1.22 only
 * appended fields, so the binding allocates each struct {@link #STRUCT_BYTES} long and zeroed, writes
 * only these offsets and sets only these mask bits: any newer library reads a field only when its bit
 * is set.
 */
final class Layouts {
    private Layouts() {
    }

    /** Every parameter struct is allocated this long and zeroed (the largest, ucp_worker_params_t, is 200 B in 1.13). */
    static final long STRUCT_BYTES = 256;

    // ---------------------------------------------------------------- ucp_params_t (80 B in 1.13, 88 in 1.20)
    static final long PARAMS_FIELD_MASK = 0;
    static final long PARAMS_FEATURES = 8;
    static final long PARAMS_NAME = 72;
    static final long UCP_PARAMS_SIZE_113 = 80;
    static final long UCP_PARAM_FIELD_FEATURES = 1L;
    static final long UCP_PARAM_FIELD_NAME = 1L << 8;
    static final long UCP_FEATURE_TAG = 1L;
    static final long UCP_FEATURE_RMA = 1L << 1;
    static final long UCP_FEATURE_WAKEUP = 1L << 4;

    // ---------------------------------------------------------------- ucp_worker_params_t (200 B)
    static final long WORKER_FIELD_MASK = 0;
    static final long WORKER_THREAD_MODE = 8;
    static final long WORKER_EVENTS = 144;
    static final long WORKER_NAME = 176;
    static final long WORKER_PARAMS_SIZE_113 = 200;
    static final long UCP_WORKER_PARAM_FIELD_THREAD_MODE = 1L;
    static final long UCP_WORKER_PARAM_FIELD_EVENTS = 1L << 2;
    static final long UCP_WORKER_PARAM_FIELD_NAME = 1L << 6;
    static final int UCS_THREAD_MODE_SINGLE = 0;
    static final int UCS_THREAD_MODE_SERIALIZED = 1;
    static final int UCS_THREAD_MODE_MULTI = 2;
    static final int UCP_WAKEUP_RMA = 1;
    static final int UCP_WAKEUP_TAG_SEND = 1 << 2;
    static final int UCP_WAKEUP_TAG_RECV = 1 << 3;
    static final int UCP_WAKEUP_TX = 1 << 10;
    static final int UCP_WAKEUP_RX = 1 << 11;

    // ---------------------------------------------------------------- ucp_ep_params_t (104 B)
    static final long EP_FIELD_MASK = 0;
    static final long EP_ADDRESS = 8;
    static final long EP_ERR_MODE = 16;
    static final long EP_ERR_HANDLER_CB = 24;
    static final long EP_ERR_HANDLER_ARG = 32;
    static final long UCP_EP_PARAM_FIELD_ERR_HANDLER = 1L << 2;
    static final long EP_NAME = 80;
    static final long EP_PARAMS_SIZE_113 = 104;
    static final long UCP_EP_PARAM_FIELD_REMOTE_ADDRESS = 1L;
    static final long UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE = 1L << 1;
    static final long UCP_EP_PARAM_FIELD_NAME = 1L << 7;
    static final int UCP_ERR_HANDLING_MODE_NONE = 0;
    static final int UCP_ERR_HANDLING_MODE_PEER = 1;

    // ---------------------------------------------------------------- ucp_request_param_t (72 B in 1.13, 96 in 1.22)
    static final long REQ_OP_ATTR_MASK = 0; // uint32
    static final long REQ_FLAGS = 4; // uint32
    static final long REQ_MEMORY_TYPE = 48;
    static final long REQ_RECV_INFO = 56;
    static final long REQ_MEMH = 64;
    static final long REQUEST_PARAM_SIZE_113 = 72;
    static final int UCP_OP_ATTR_FIELD_FLAGS = 1 << 4;
    static final int UCP_OP_ATTR_FIELD_MEMORY_TYPE = 1 << 6;
    static final int UCP_OP_ATTR_FIELD_RECV_INFO = 1 << 7;
    static final int UCP_OP_ATTR_FIELD_MEMH = 1 << 8;
    static final int UCP_OP_ATTR_FLAG_NO_IMM_CMPL = 1 << 16;
    static final int UCP_OP_ATTR_FIELD_DATATYPE = 1 << 3;
    static final long REQ_DATATYPE = 24;
    /** ucp_dt_make_iov(): UCP_DATATYPE_IOV; count is then the number of ucp_dt_iov_t {void *buffer; size_t length} entries. */
    static final long UCP_DATATYPE_IOV = 2;
    static final long DT_IOV_SIZE = 16;
    static final int UCP_EP_CLOSE_FLAG_FORCE = 1;

    // ---------------------------------------------------------------- ucp_tag_recv_info_t (16 B)
    static final long RECV_INFO_SENDER_TAG = 0;
    static final long RECV_INFO_LENGTH = 8;
    static final long RECV_INFO_SIZE = 16;

    // ---------------------------------------------------------------- ucp_mem_map_params_t (40 B in 1.13, 48 in 1.14)
    static final long MEM_FIELD_MASK = 0;
    static final long MEM_ADDRESS = 8;
    static final long MEM_LENGTH = 16;
    static final long MEM_FLAGS = 24;
    static final long MEM_MEMORY_TYPE = 32;
    static final long MEM_MAP_PARAMS_SIZE_113 = 40;
    static final long UCP_MEM_MAP_PARAM_FIELD_ADDRESS = 1L;
    static final long UCP_MEM_MAP_PARAM_FIELD_LENGTH = 1L << 1;
    static final long UCP_MEM_MAP_PARAM_FIELD_FLAGS = 1L << 2;
    static final long UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE = 1L << 4;
    static final int UCP_MEM_MAP_ALLOCATE = 1 << 1;

    // ---------------------------------------------------------------- ucp_context_attr_t (64 B)
    static final long CTX_ATTR_FIELD_MASK = 0;
    static final long CTX_ATTR_MEMORY_TYPES = 24;
    static final long UCP_ATTR_FIELD_MEMORY_TYPES = 1L << 2;

    /** ucs_memory_type_t: HOST and CUDA keep their values in every version; UNKNOWN does not (never passed). */
    static final int UCS_MEMORY_TYPE_HOST = 0;
    static final int UCS_MEMORY_TYPE_CUDA = 1;

    /** ucs_config_print_flags_t: UCS_CONFIG_PRINT_CONFIG. */
    static final int UCS_CONFIG_PRINT_CONFIG = 1;

    // ---------------------------------------------------------------- glibc x86-64 / aarch64 struct sigaction (152 B)
    static final long SIGACTION_HANDLER = 0;
    static final long SIGACTION_BYTES = 256;
}
