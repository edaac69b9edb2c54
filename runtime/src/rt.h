/*
 * rt.h - internals of opc's CPU runtime, shared by the files of src/.
 *
 * Every asynchronous API call builds an Op (what to compute, with copies of
 * its descriptors and scalars) and submits it to a stream. A stream is a
 * worker thread running a FIFO of Tasks; a Task runs one Op after waiting
 * for Fences (points in other streams' FIFOs). Ops are reference counted
 * because a captured graph keeps them and replays them many times.
 *
 * Several devices are emulated (device.c): streams, events, handles and
 * device allocations belong to the device current when they were made,
 * and the checker reports work on one device touching another's memory.
 *
 * One global lock (rt.lock) guards every queue, stream, event, graph and the
 * checker's state; one condition variable (rt.cond) is broadcast when a task
 * completes that some sleeping thread waits for (Stream.want_seq), so a host
 * waiting for the end of a long queue is not woken by every task in it.
 */
#ifndef OPC_RT_H
#define OPC_RT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda.h"
#include "cuda_runtime_api.h"

/* ---- operations ---- */

/* A byte range an op reads or writes, for the checking mode. */
typedef struct Span {
  uintptr_t lo, hi;
  bool write;
} Span;

typedef struct Op Op;
typedef void OpFn(Op *op);

/* What node a captured op becomes in a CUDA graph: what a conditional
 * node's body may hold depends on it (graph.c). cuDNN's and cuBLAS's
 * calls stay OP_LIBRARY: the runtime cannot show that a GPU runs them as
 * kernel nodes only. */
typedef enum {
  OP_LIBRARY,  /* cuDNN, cuBLAS, cuBLASLt: nodes of unknown types */
  OP_KERNEL,   /* cuLaunchKernel */
  OP_MEMCPY,   /* a copy between device or pinned memory */
  OP_MEMCPY_PAGEABLE, /* a copy with an end in pageable host memory */
  OP_MEMSET,
  OP_HOST,     /* cudaLaunchHostFunc */
  OP_MEM_FREE, /* cudaFreeAsync */
  OP_CONDITIONAL,
} OpKind;

/* Room for the combined op an AbsorbFn builds (see Op.absorb). */
#define OP_PLAN_BYTES 1024

/*
 * Tries to fold `next`, the op queued right after `cur` on the same stream,
 * into one run: writes into `plan` (OP_PLAN_BYTES, suitably aligned) an op
 * that does the work of both and returns true, or returns false and leaves
 * `plan` alone. `cur` is the original op or, after an earlier success,
 * `plan` itself.
 */
typedef bool AbsorbFn(const Op *cur, const Op *next, void *plan);

struct Op {
  OpFn *run;
  OpFn *release;    /* frees what the op owns besides itself; may be NULL */
  AbsorbFn *absorb; /* may be NULL; see AbsorbFn */
  int refs;         /* atomic */
  const char *api;  /* the call that made it, e.g. "cudnnConvolutionForward" */
  const char *name; /* innermost NVTX range when it was made (interned) */
  /* Set when the call that made it returned to the host before the op
   * was done although it looks synchronous (a cudaMemcpy from pageable
   * memory, a cudaMemset): what the checker calls it in reports. */
  const char *unsynced;
  /* The device the op runs on: its first stream's, kept for replays
   * (a graph node keeps its device whatever stream the graph is launched
   * on); -1 until submitted. */
  int device;
  /* A copy (or host function): it may be queued on any device's stream
   * and touch any device's memory, as copies between devices do. */
  bool transfer;
  OpKind kind;
  Span *spans;      /* filled only in checking mode */
  int nspans, capspans;
};

/* Allocates a zeroed op of `size` bytes (a struct that begins with Op). */
void *op_new(size_t size, OpFn *run, const char *api);
void op_ref(Op *op);
void op_unref(Op *op);
/* Records that the op reads or writes [p, p + bytes); no-op unless checking. */
void op_span(Op *op, const void *p, size_t bytes, bool write);
/* Records a strided block: elements of `elem` bytes at p + sum(i_d*stride_d). */
void op_span_strided(Op *op, const void *p, int rank, const long long *dims,
                     const long long *strides, size_t elem, bool write);

/* ---- streams, tasks, events ---- */

typedef struct CUstream_st Stream;
typedef struct CUevent_st Event;
typedef struct Capture Capture;

typedef struct Fence {
  Stream *stream;
  uint64_t seq; /* done when stream->done_seq >= seq */
} Fence;

typedef struct Task {
  struct Task *next;
  uint64_t seq;
  Op *op;          /* NULL for a pure wait or record */
  struct CUgraphExec_st *exec; /* the graph launch the op belongs to, or NULL */
  Event *record;   /* set: timestamp this event when reached */
  uint64_t record_gen;
  Fence *waits;
  int nwaits;
} Task;

#define MAX_AGENTS 256
#define MAX_DEVICES 16

struct CUstream_st {
  int id;          /* 0 for the legacy streams, then creation order */
  int device;      /* the device it belongs to */
  unsigned flags;
  int refs;        /* the user's + tasks', graphs' and fences' references */
  bool destroyed;  /* the user called cudaStreamDestroy */
  pthread_t thread;
  pthread_cond_t wake; /* signalled when a task is queued */
  bool stop;          /* no references left: exit once the queue is empty */
  Task *head, *tail;
  uint64_t next_seq; /* seq of the next task; seqs start at 1 */
  uint64_t done_seq; /* every task up to this one has completed; written
                        atomically, under rt.lock, for spinning readers */
  uint64_t pushed;   /* tasks queued so far, for a worker polling unlocked */
  uint64_t want_seq; /* the lowest seq a thread sleeping on rt.cond waits for
                        (UINT64_MAX: none); reaching it broadcasts rt.cond */

  Capture *capture;  /* set while the stream is being captured */
  int cap_index;     /* its index in capture->streams */

  int agent;         /* checking: index into vector clocks, -1 if none */
  uint32_t *clock;   /* checking: what this stream's last op knows */
};

struct CUevent_st {
  unsigned flags;
  int device;        /* the device current when it was created */
  int refs;
  bool destroyed;
  bool recorded;
  Fence fence;       /* the point of the latest record */
  uint64_t gen;      /* counts records, so a stale record task is ignored */
  uint64_t timed_gen;
  double time_ms;    /* when the latest record was reached */
  uint32_t *clock;   /* checking: the recording stream's knowledge */
  Capture *capture;  /* recorded in this capture ... */
  int slot;          /* ... as this slot */
};

enum { REFUSE_NONE, REFUSE_OTHER, REFUSE_ALL };

typedef struct Runtime {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  Stream *legacy[MAX_DEVICES]; /* made when a thread first sets the device */
  Stream **streams; /* every live stream */
  int nstreams, capstreams;
  int next_stream_id;
  int ncaptures;    /* captures in progress */

  bool check;       /* OPC_CHECK=1 */
  bool pageable_error; /* OPC_RT_PAGEABLE=error */
  int refuse_fused;    /* OPC_RT_REFUSE_FUSED: REFUSE_NONE, _OTHER or _ALL */
  bool concurrent_graphs; /* OPC_GRAPH_BRANCHES=concurrent */
  bool raced;       /* a race was reported: every call fails from now on */
  int async_error;  /* a cudaError_t from a failed operation, sticky */
  struct CUgraphExec_st *replaying; /* the graph whose ops are being queued */
  int nagents;
  uint32_t *host_clock;
  int agent_stream_id[MAX_AGENTS];
  int agent_device[MAX_AGENTS];
  unsigned peer[MAX_DEVICES]; /* bit p: the device may access p's memory */
} Runtime;

extern Runtime rt;

/* Called by every entry point: initialises once, then returns
 * cudaErrorLaunchFailure for good once the checker has seen a race. */
cudaError_t rt_enter(void);
bool rt_failed(void);
/* Sets the calling thread's last error and returns it. */
cudaError_t rt_error(cudaError_t err);
/* NULL, cudaStreamLegacy and cudaStreamPerThread all name the legacy
 * stream of the calling thread's current device. */
Stream *rt_stream(cudaStream_t s);
/* The same for a library handle of `device`: its NULL stream is that
 * device's legacy stream. */
Stream *rt_stream_on(cudaStream_t s, int device);
bool rt_is_legacy(const Stream *s);
/* Makes device's legacy stream if it has none yet (cudaSetDevice). */
cudaError_t rt_device_ready(int device);
/* The calling thread's current device (device.c), and how many there are. */
int rt_device(void);
int rt_device_count(void);
/* cudaErrorInvalidResourceHandle when work other than a copy is queued on
 * a stream of a device that is not the current one, as CUDA refuses a
 * kernel launched there; else cudaSuccess. */
cudaError_t rt_launch_device_check(const Stream *s, const Op *op);
double rt_now_ms(void);
/* Records that an operation failed while it ran (out of scratch memory):
 * printed once, then returned by every later synchronisation. */
void rt_fail_async(const char *api);
/* The same for an error a kernel met on the device (cudaErrorLaunchFailure,
 * say): `why` is printed once, with the first such error. */
void rt_fail_device(cudaError_t err, const char *why);
/* The sticky error of rt_fail_async, or cudaSuccess. */
cudaError_t rt_async_error(void);
/* What a call that waited for work returns: cudaErrorLaunchFailure once the
 * checker saw a race, else rt_async_error. */
cudaError_t rt_wait_result(void);

/*
 * Submits op to stream s (consuming the caller's reference): records it
 * when s is being captured, else checks it (checking mode) and queues it.
 */
cudaError_t rt_submit(cudaStream_t s, Op *op);
/* The same with rt.lock held. */
cudaError_t rt_submit_locked(Stream *s, Op *op);
/*
 * Submits op for a library handle bound to `stream` whose warmed-up kinds of
 * call are the bits of *warm. Inside a capture, a kind (`bit`) the handle
 * never ran eagerly is refused: the op is dropped, the capture invalidated
 * and *cold set (the library returns its NOT_INITIALIZED), a conservative
 * model of cuDNN's and cuBLAS's lazy initialisation. An eager run warms it.
 */
cudaError_t rt_submit_for_handle(int device, cudaStream_t stream, Op *op, unsigned *warm,
                                 unsigned bit, bool *cold);
/* Queues a task that waits for `f` and does nothing else. rt.lock held. */
void rt_queue_wait_locked(Stream *s, Fence f);
/* Queues a task that timestamps e; returns its fence. rt.lock held. */
Fence rt_queue_record_locked(Stream *s, Event *e);
/* cudaEventRecord and cudaStreamWaitEvent outside a capture (and an event
 * record or wait node's replay). rt.lock held. */
void rt_event_record_locked(Stream *s, Event *e);
void rt_event_wait_locked(Stream *s, Event *e);
/* Blocks the host until f is done; rt.lock held. */
void rt_wait_fence_locked(Fence f);
Fence rt_last_fence_locked(Stream *s);
bool rt_fence_done_locked(Fence f);
void stream_ref_locked(Stream *s);
void stream_unref_locked(Stream *s);
void event_unref_locked(Event *e);
/* Waits until every stream of `device` is idle and, in checking mode,
 * tells the host everything they did; rt.lock held. */
void rt_sync_device_locked(int device);
/* Queues on s a wait for everything queued so far on the streams of the
 * devices in `mask` (bit d: device d), and joins their clocks. rt.lock held. */
void rt_order_after_devices_locked(Stream *s, unsigned mask);
/* Only waits: the checker learns nothing. rt.lock held. */
void rt_wait_all_locked(void);
/* cudaDeviceSynchronize, for the calls documented to do one (cudnnDestroy,
 * cublasDestroy). */
cudaError_t rt_device_sync(void);

/* ---- capture (graph.c) ---- */

/* Appends a work, record or wait entry to the capture s belongs to. */
void capture_add_op_locked(Stream *s, Op *op);
cudaError_t capture_record_locked(Stream *s, Event *e);
cudaError_t capture_wait_locked(Stream *s, Event *e);
void capture_invalidate_locked(Capture *c);
void capture_invalidate_all_locked(void);
/*
 * Whether a capture in progress bars the calling thread from "potentially
 * unsafe" calls (cudaMalloc, cudaFree, synchronous copies, handle
 * creation, module loads, ...) under CUDA's capture interaction modes; if
 * so, invalidates the captures that bar it, and the caller must fail with
 * cudaErrorStreamCaptureUnsupported (or its library's equivalent).
 * rt.lock held.
 */
bool capture_forbids_unsafe_locked(void);
/* The same, taking rt.lock. */
bool rt_capture_forbids(void);
/* Whether using the legacy stream now would join a capture (one holds a
 * blocking stream); if so, and `invalidate`, invalidates it: the caller
 * fails with cudaErrorStreamCaptureImplicit. rt.lock held. */
bool capture_blocks_legacy_locked(int device, bool invalidate);

/* The executable graph whose op the calling thread runs (NULL: none), and
 * whether it runs a kernel's part: what cudaGraphSetConditional, called
 * by a kernel, checks. The stream worker sets the graph from its task; a
 * kernel's parts, on pool threads, take it from the worker. */
struct CUgraphExec_st *graph_running(void);
void graph_set_running(struct CUgraphExec_st *x);
void graph_set_in_kernel(bool in_kernel);
/* A task of a graph launch holds its executable graph. rt.lock held. */
void graph_exec_ref_locked(struct CUgraphExec_st *x);
void graph_exec_unref_locked(struct CUgraphExec_st *x);
/* Device code (a kernel's call, prelude_cpu.h); graph.c. */
void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value);

/* ---- checking mode (check.c) ---- */

void check_init(void);
/* Gives a new stream its agent and clock. rt.lock held. */
void check_stream_created_locked(Stream *s);
/* Advances s's clock for op (joining `extra` clocks first) and checks its
 * spans: for races, and unless op is a transfer, for memory of another
 * device than op->device. */
void check_op_locked(Stream *s, Op *op);
/* Joins the host's knowledge (and the legacy stream's implicit ordering)
 * into s's clock before anything is queued on s. */
void check_enter_locked(Stream *s);
/* The host learns everything s (or e) knows: a host synchronisation. */
void check_host_sync_locked(const uint32_t *clock);
void clock_join(uint32_t *into, const uint32_t *from);
void clock_copy(uint32_t *into, const uint32_t *from);
uint32_t *clock_new(void);
/* Forgets every access in [lo, hi): the memory was freed. */
void check_forget_locked(uintptr_t lo, uintptr_t hi);
/* The host frees [lo, hi) with `api`: reports an access to it that the
 * host has not synchronised with, then forgets them all. */
void check_free_locked(uintptr_t lo, uintptr_t hi, const char *api);
/* Reports a failure that must make the process fail. */
void check_fail(void);

/* ---- memory (memory.c) ---- */

typedef enum {
  MEM_PAGEABLE, /* the program's own host memory */
  MEM_DEVICE,   /* cudaMalloc, cudaMallocAsync, cudaMallocManaged */
  MEM_PINNED,   /* cudaMallocHost, cudaHostAlloc, cudaHostRegister */
} MemKind;

/* What kind of memory p points into. rt.lock held. */
MemKind mem_kind_locked(const void *p);
/* The device whose memory (cudaMalloc, cudaMallocAsync) p points into, or
 * -1: host, pinned or managed memory, which every device may use. rt.lock held. */
int mem_device_locked(const void *p);

/* ---- NVTX (nvtx.c) ---- */

/* The innermost open range of the calling thread (interned), or NULL. */
const char *nvtx_current(void);
const char *intern(const char *s);

/* ---- thread pool (pool.c) ---- */

typedef void PartFn(void *ctx, int part, int nparts);
/* Runs fn(ctx, p, nparts) for every p in [0, nparts), in parallel; returns when all are done. */
void pool_run(PartFn *fn, void *ctx, int nparts);
int pool_threads(void);
/* Parts for `work` units of roughly equal cost, at least `grain` units each. */
int pool_parts(long long work, long long grain);
/* Per-thread scratch memory; slots 0..3 are independent buffers, 64-byte
 * aligned, kept for the thread's life. NULL when out of memory. */
void *scratch(int slot, size_t bytes);

/* A function built for AVX-512, for AVX2 with FMA and for plain x86-64,
 * the build for the CPU's instruction sets chosen when the program loads
 * (an ifunc): for loops the compiler vectorises, outside the kernels. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define OPC_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define OPC_VECTOR_CLONES
#endif

/* A function whose copy loops must stay loops: GCC turns one into a call
 * to memcpy, which costs more than the copy when rows are short. */
#if defined(__GNUC__) && !defined(__clang__)
#define OPC_INLINE_COPIES __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define OPC_INLINE_COPIES
#endif

/* ---- 16-bit floating-point storage (half.c) ---- */

/*
 * FP16 (IEEE binary16) and BF16 (the top half of a float32) are storage
 * formats only: an operation on them converts its operands to float
 * (exactly), runs the float implementation, and rounds its results back to
 * nearest, ties to even. FP16 overflows to infinity; NaN stays NaN in both.
 */
float f16_to_float(uint16_t h);
uint16_t float_to_f16(float f);
float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float f);

/* How an operand of a 16-bit operation is stored. */
typedef enum {
  STORE_F32,  /* float: the inner op uses it where it is, no copy */
  STORE_F16,
  STORE_BF16,
} Store;

#define HALF_MAX_ARGS 6
#define HALF_MAX_DIMS 8

/* One operand: where it lies, and whether the operation reads or writes it. */
typedef struct HalfArg {
  void *dev;
  Store store;
  bool read, write;
  int rank;
  long long dims[HALF_MAX_DIMS];
  long long strides[HALF_MAX_DIMS]; /* in elements; 0 repeats (only for reads) */
} HalfArg;

/* Points a copy of the inner op at its operands: ptrs[i] is argument i's
 * float copy, packed in its dims (or the operand itself for STORE_F32). */
typedef void HalfBindFn(Op *inner, void *const *ptrs);

/*
 * An op that runs `inner`, a float op of `inner_size` bytes (at most
 * OP_PLAN_BYTES) built over packed float copies of the args, on each run:
 * it allocates the copies (host memory of its own), fills those it reads,
 * runs a copy of inner bound to them, rounds those it writes back into
 * their own elements only, and frees the copies. Takes over the caller's
 * reference to inner (also on failure, NULL). Its spans are the caller's
 * to record, over the 16-bit operands.
 */
Op *half_op_new(Op *inner, size_t inner_size, HalfBindFn *bind, const HalfArg *args, int nargs);
/* Row-major packed strides of dims; returns the element count. */
long long packed_strides(int rank, const long long *dims, long long *strides);
/* The same with dim 1 innermost (NHWC for rank 4); rank at least 2. */
long long channels_last_strides(int rank, const long long *dims, long long *strides);

/* ---- the GEMM library, oneDNN or OpenBLAS, loaded on first use (blas.c) ---- */

/* Loads it once; false (and a message on stderr) when it cannot. */
bool blas_ready(void);
/* Which GEMM runs (oneDNN's, or OpenBLAS's kernels and who chose them), or
   why none loaded. */
const char *blas_description(void);
/* cblas_sgemm's arguments; only after blas_ready() returned true. False
   when the library reports a failure. */
bool blas_sgemm(bool row_major, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
/* Column-major y = alpha op(A) x + beta y for op(A) = A^T, m rows of k
   floats lda apart, along AVX-512 (gemv_avx512.c): false, and nothing
   done, where the runtime was built without it. */
bool gemv_rows_avx512(int m, int k, float alpha, const float *a, long long lda, const float *x,
                      float beta, float *y);
/* Whether oneDNN's int8 GEMM (dnnl_gemm_s8s8s32) is loaded. */
bool blas_has_gemm_s8(void);
/* Column-major int32 C = op(A) op(B) of int8 matrices; only after
   blas_has_gemm_s8() returned true. False if the library failed. */
bool blas_gemm_s8(bool trans_a, bool trans_b, int m, int n, int k, const signed char *a, int lda,
                  const signed char *b, int ldb, int *c, int ldc);

/* ---- float GEMMs with cuBLASLt's epilogues (cublas.c, for cublaslt.c) ---- */

typedef enum { LT_ACT_NONE, LT_ACT_RELU, LT_ACT_GELU } LtAct;

/*
 * A checked column-major GEMM, D = act(alpha op(A) op(B) + beta D + bias),
 * or a strided batch of them: D is also C (read when beta is not 0), bias
 * (NULL: none) has one element per row of D, shared by the batch, and
 * GELU is the tanh approximation. A, B, D and bias are all `store`.
 */
typedef struct LtGemm {
  bool ta, tb;
  int m, n, k, batch;
  const void *A, *B, *bias;
  void *D;
  int lda, ldb, ldd;
  long long sa, sb, sd;
  Store store;
  float alpha, beta;
  LtAct act;
} LtGemm;

/* The op, its spans recorded, for the caller to submit; NULL when out of
   memory. */
Op *gemm_epilogue_op(const LtGemm *c, const char *api);

#endif
