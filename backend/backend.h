/* backend.h - printing the IR as one standalone C program. */
#ifndef OPC_BACKEND_H
#define OPC_BACKEND_H

#include "../ir/ir.h"

/* --target: which program is emitted and what it links against. The CPU
   program differs from the GPU program only where the backend has a CPU
   kernel of its own (a channels-last int8 convolution, its filter packed
   at compile time); the stand-in target runs the GPU program on opc's CPU
   runtime, which is how the tests check the GPU program without a GPU. */
typedef enum Target {
  TARGET_CUDA,    /* the GPU program, linked against CUDA */
  TARGET_CPU,     /* the CPU program, linked against opc's CPU runtime */
  TARGET_STAND_IN /* the GPU program, linked against opc's CPU runtime */
} Target;

/* "cuda", "cpu" or "stand-in", as --target spells it. */
const char *target_name(Target t);

typedef struct EmitOptions {
  const char *c_path;       /* net.c */
  const char *h_path;       /* net.h */
  const char *weights_path; /* net.weights, unless embed_weights */
  const char *prefix;       /* symbol prefix; "net" by default */
  bool embed_weights;       /* link the weights in with .incbin */
  bool cuda_graph;          /* capture once, replay on every run (default) */
  bool tf32;                /* --precision tf32, fp16 or bf16: tensor cores allowed */
  const char *precision;    /* --precision's name, for the profile; NULL: "fp32" or "tf32" */
  Target target;            /* TARGET_CPU emits the CPU program; the others the GPU's */
  /* The CPU that runs the CPU program has AVX-512 VNNI (--cpu-features):
     its int8 convolutions are opc_int8_conv_packed, whose plain body is
     far slower than the GEMM path where the instructions are missing. */
  bool cpu_vnni;
  /* A serving program (Graph.serve): each model's weights file, and how
     many requests each model's queue holds. */
  const char *const *model_weights_paths;
  int queue_capacity;
  const double *serve_interval_ms; /* per model: the launcher's default; NULL: 0 */
  const char *serve_note;          /* how they were chosen, for net.h; NULL: not */
} EmitOptions;

/* Writes net.c, net.h and the weights. Nothing is left behind on failure. */
bool emit_program(Graph *g, const EmitOptions *opt);

/* The element types (bit t: DType t) the emitted code handles for a kind's
   run-time data; parameter and index inputs are checked apart. */
uint32_t backend_run_time_types(OpKind op);

/* Compiler and linker flags for building an emitted program by hand. */
const char *target_cflags(Target t);
const char *target_libs(Target t);
/* Compiles and links `c_path` into `exe_path` with the system C compiler:
   an executable, or with `shared` a shared library without main(). With
   `main_prefix` (a program whose main is opc's own, of that symbol prefix)
   main comes compiled from opc's cache (build.c). */
bool build_executable(const char *c_path, const char *exe_path, Target t, bool shared,
                      const char *main_prefix);
/* The command line's main alone (what net.c holds under OPC_MAIN_APART),
   the same for every program of symbol prefix `prefix`. */
bool write_main_source(FILE *f, const char *prefix);

/* A Triton model around programs built in MODEL_DIR/1: libnet.so, or
   libnet_bB.so for each batch size B with max_batch. Writes
   MODEL_DIR/config.pbtxt and, for opc's native backend, a copy of
   libtriton_opc.so in MODEL_DIR; for the Python backend, MODEL_DIR/1/model.py. */
typedef struct TritonOptions {
  const char *model_dir; /* REPO/NAME */
  const char *name;      /* the model's name in Triton */
  const char *source;    /* the ONNX file, named in config.pbtxt */
  int instances;         /* instance_group count */
  Target target;         /* KIND_GPU for cuda, KIND_CPU for cpu and stand-in */
  bool python;           /* --triton-backend python */
  int max_batch;         /* max_batch_size and dynamic batching; 0: none */
} TritonOptions;
bool write_triton_model(const Graph *g, const TritonOptions *o);

#endif
