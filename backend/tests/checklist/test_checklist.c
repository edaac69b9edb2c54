/*
 * test_checklist.c - docs/adding-an-operator.md's checklist, walked for
 * every kind of ir/ops.def. Each missing piece is one line naming the
 * operator and the piece; the test fails when there is any.
 *
 * usage: test_checklist scalar/scalar.h docs/operators.md
 *
 * The pieces, in the checklist's order:
 *  1. a shape function (the row's infer);
 *  2. an evaluator (fold): AT_COMPILE_TIME and FROM_SHAPES kinds cannot
 *     be compiled without one, and the checklist gives every kind one so
 *     that constant subgraphs fold;
 *  3. AT_RUN_TIME kinds: an emitter (kernel or library), and for a row
 *     that names an opc kernel, the instance the backend asks for on each
 *     of its run_types, in both the runtime's kernel table (kernel_find)
 *     and the kernel source the backend embeds in net.c; AT_COMPILE_TIME
 *     and FROM_SHAPES kinds have no emitter;
 *  4. the fused activation (act): its formula opc_<act_name>_of in
 *     scalar.h, its OPC_ACTIVATIONS row with the row's parameter count,
 *     and its kernel opc_<act_name> on the row's float types; every other
 *     elementwise activation (a unary kernel with float attributes, or
 *     whose kernel calls a formula): its formula opc_<kernel>_of;
 *  5. a row of docs/operators.md naming the operator (tests/cli checks
 *     that the page is what `opc --list-operators` prints).
 *
 * scalar.h and operators.md are read as text, so that the file a check
 * reads is the one in the tree.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "kernel_source.h"
#include "ktable.h"
#include "scalar.h"

static int missing;

/* One missing piece: "HardSwish: no ...". */
static void lack(OpKind op, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s: ", op_name(op));
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  missing++;
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    exit(2);
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  rewind(f);
  char *text = calloc(1, (size_t)size + 1);
  if (fread(text, 1, (size_t)size, f) != (size_t)size) {
    perror(path);
    exit(2);
  }
  fclose(f);
  return text;
}

/* ------------------------------------------------------------- kernels */

/* The block of the backend's kernel source named `name`, or NULL. */
static const KernelBlock *source_block(const char *name, KernelBlockKind kind) {
  for (int i = 0; i < kernel_nblocks; i++)
    if (kernel_blocks[i].kind == kind && strcmp(kernel_blocks[i].name, name) == 0)
      return &kernel_blocks[i];
  return NULL;
}

/* Where kernel `name` is missing: "" when both the CPU runtime's table and
   the backend's source have it. */
static const char *kernel_gap(const char *name) {
  bool runtime = kernel_find(name, strlen(name)) != NULL;
  bool backend = source_block(name, KB_KERNEL) != NULL;
  if (runtime && backend)
    return "";
  if (!runtime && !backend)
    return "no run-time kernel";
  return runtime ? "not in the backend's kernel source: kernel" : "not in the runtime's kernel table: kernel";
}

/* Whether input 0's ONNX type word names `type`. */
static bool first_input_takes(OpKind op, const char *type) {
  const char *types = op_info(op)->types;
  size_t len = strcspn(types, " ");
  char word[64];
  snprintf(word, sizeof word, "%.*s", (int)len, types);
  return strstr(word, type) != NULL;
}

/* Whether input 0's ONNX type word ("f32", "i8|u8", "float|i32|i64")
   leaves t out: then t is in run_types for an output only
   (NonMaxSuppression's int64 rows) or for a later input only (Pow's
   exponent), and no instance reads it as its element type. The group word
   "float" admits the four float types; the others ("num", "any", "int")
   admit every type of their run_types. */
static bool output_only_type(OpKind op, DType t) {
  const char *types = op_info(op)->types;
  bool listed = false;
  for (const char *p = types; *p && *p != ' ';) {
    size_t len = strcspn(p, "| ");
    char name[16];
    snprintf(name, sizeof name, "%.*s", (int)len, p);
    DType d = dtype_from_name(name);
    if (strcmp(name, "float") == 0)
      listed |= ((TY_F32 | TY_F64 | TY_F16 | TY_BF16) >> t) & 1;
    else if (d == DT_UNDEFINED)
      return false; /* a group word */
    listed |= d == t;
    p += len + (p[len] == '|');
  }
  return !listed;
}

/* Whether input 0's ONNX type word admits bool: comparisons and IsNaN list
   bool in run_types for their output only. */
static bool first_input_takes_bool(OpKind op) {
  return first_input_takes(op, "bool") || first_input_takes(op, "any");
}

/* The instance of kernel `base` that the backend launches on type t, as
   types.c names it: by element size (T_SIZED_KERNEL, "opc_where_b4"),
   else by type ("opc_add_i64"; bools by uint8's instance, which reads the
   same bytes). Float32 is the kernel's plain name unless its row says
   T_TYPED_KERNEL; kernels shared by typed families (the reductions, the
   comparisons) are named by type there too, so either name serves, and
   a bool-only kernel likewise has its plain name. */
static void check_instance(Emitter *e, OpKind op, const char *base, DType t) {
  unsigned traits = op_info(op)->traits;
  const char *name = traits & T_SIZED_KERNEL ? sized_kernel(e, base, t)
                     : typed_kernel(e, base, t == DT_BOOL ? DT_UINT8 : t);
  bool plain_serves = !(traits & T_SIZED_KERNEL) &&
                      ((t == DT_FLOAT && !(traits & T_TYPED_KERNEL)) ||
                       (t == DT_BOOL && op_info(op)->run_types == TY_BOOL));
  const char *gap = kernel_gap(name);
  if (!*gap || (plain_serves && !*kernel_gap(base)))
    return;
  if (plain_serves)
    lack(op, "%s %s (or %s) for %s, which its run_types state", gap, base, name, dtype_name(t));
  else
    lack(op, "%s %s for %s, which its run_types state", gap, name, dtype_name(t));
}

/* The row's kernel on each type of its run_types that reaches opc's
   kernels: a node on float16 or bfloat16 whose library emitter prints
   16-bit forms (cuDNN, cuBLAS) never falls back to them (node_emitter). */
static void check_kernels(Emitter *e, OpKind op) {
  const OpInfo *info = op_info(op);
  const OpEmitter *library = op_emitter(op);
  const char *base = op_kernel(e, op);
  if (!base)
    return;
  if (!kernel_op_emitter(op))
    lack(op, "its row names kernel %s but no emitter to launch it", base);
  for (int t = 0; t < 32; t++) {
    if (!(info->run_types & (1u << t)))
      continue;
    bool sixteen = t == DT_FLOAT16 || t == DT_BFLOAT16;
    if (sixteen && library && library->half)
      continue;
    if (t == DT_BOOL && !(info->traits & T_SIZED_KERNEL) && !first_input_takes_bool(op))
      continue;
    if (t == DT_FLOAT && (info->traits & T_QUANTIZED_KERNEL))
      continue; /* every instance takes float32 beside its quantized type */
    if (t == DT_INT32 && (info->traits & T_QUANTIZED_KERNEL) && !first_input_takes(op, "i32"))
      continue; /* int32 is an integer product's sum, which each instance writes */
    if (output_only_type(op, (DType)t))
      continue;
    check_instance(e, op, base, (DType)t);
  }
}

static void check_emitters(Emitter *e, OpKind op) {
  const OpInfo *info = op_info(op);
  const OpEmitter *kernel = kernel_op_emitter(op), *library = op_emitter(op);
  if (info->eval != AT_RUN_TIME) {
    /* Shape and Size of a bounded tensor run (T_BOUND_SHAPE, ir/bounds.c) */
    if ((kernel || library) && !(info->eval == FROM_SHAPES && (info->traits & T_BOUND_SHAPE)))
      lack(op, "it folds at compile time (eval), yet its row names an emitter: change eval to AT_RUN_TIME");
    return;
  }
  if (!kernel && !library)
    lack(op, "no emitter (kernel or library) for a kind that runs at run time");
  if ((kernel && !kernel->run) || (library && !library->run))
    lack(op, "its emitter has no run function");
  check_kernels(e, op);
}

/* --------------------------------------------------------- activations */

/* The activations a program fuses (scalar.h's OPC_ACTIVATIONS). */
static const struct {
  const char *name;
  int params;
} fusable[] = {
#define FUSABLE_ROW(NAME, name, params) {#name, params},
    OPC_ACTIVATIONS(FUSABLE_ROW)
#undef FUSABLE_ROW
};

static bool has_formula(const char *scalar_h, const char *name) {
  char decl[128];
  snprintf(decl, sizeof decl, "float opc_%s_of(", name);
  return strstr(scalar_h, decl) != NULL;
}

/* Whether the kernel's source calls one of scalar.h's formulas (the helpers
   kernel_types.py writes in, "opc_..._of"). */
static bool calls_formula(const char *kernel) {
  const KernelBlock *b = source_block(kernel, KB_KERNEL);
  for (int i = 0; b && i < b->ndeps; i++) {
    const KernelBlock *dep = &kernel_blocks[b->deps[i]];
    size_t len = strlen(dep->name);
    if (dep->kind == KB_HELPER && strncmp(dep->name, "opc_", 4) == 0 && len > 3 &&
        strcmp(dep->name + len - 3, "_of") == 0)
      return true;
  }
  return false;
}

static void check_fused(Emitter *e, OpKind op, const char *scalar_h) {
  const OpInfo *info = op_info(op);
  if (info->act == OPC_ACT_NONE)
    return;
  const char *name = info->act_name;
  if (!name) {
    lack(op, "fuses as an activation but its row has no act_name");
    return;
  }
  if (!has_formula(scalar_h, name))
    lack(op, "no formula opc_%s_of in scalar/scalar.h for its fused activation", name);
  int params = (info->traits & T_ACT_ALPHA ? 1 : 0) + (info->traits & T_ACT_BETA ? 1 : 0);
  int row = -1;
  for (int i = 0; i < (int)(sizeof fusable / sizeof fusable[0]); i++)
    if (strcmp(fusable[i].name, name) == 0)
      row = i;
  if (row < 0)
    lack(op, "no OPC_ACTIVATIONS row %s in scalar/scalar.h for its fused activation", name);
  else if (fusable[row].params != params)
    lack(op, "OPC_ACTIVATIONS row %s takes %d parameters, its row's T_ACT_ALPHA/T_ACT_BETA %d",
         name, fusable[row].params, params);
  /* The kernel that applies it after a Conv or Gemm cuDNN cannot fuse it
     into (activation_launch), on the row's float types; check_kernels has
     seen it already when it is the row's own kernel. */
  const char *kernel = emit_str(e, "opc_%s", name);
  const char *own = op_kernel(e, op);
  if (own && strcmp(own, kernel) == 0)
    return;
  for (int t = 0; t < 32; t++)
    if ((info->run_types & (1u << t)) && (t == DT_FLOAT || t == DT_FLOAT16 || t == DT_BFLOAT16))
      check_instance(e, op, kernel, (DType)t);
}

/* An elementwise activation: a unary kernel whose row names float
   attributes, or whose code calls a formula. Its formula is the kernel's
   name and "_of". */
static void check_formula(Emitter *e, OpKind op, const char *scalar_h) {
  const OpEmitter *emitter = kernel_op_emitter(op);
  const char *kernel = op_kernel(e, op);
  if (!kernel || (emitter != &kernel_unary && emitter != &kernel_gelu))
    return;
  DType t = op_info(op)->traits & T_TYPED_KERNEL ? DT_FLOAT : DT_UNDEFINED;
  const char *instance = t == DT_FLOAT ? typed_kernel(e, kernel, t) : kernel;
  if (!op_info(op)->attrs && !calls_formula(instance))
    return;
  const char *name = kernel + strlen("opc_");
  if (!has_formula(scalar_h, name))
    lack(op, "no formula opc_%s_of in scalar/scalar.h for its kernel %s", name, kernel);
}

/* ---------------------------------------------------------------- docs */

static void check_docs(OpKind op, const char *page) {
  char row[128];
  snprintf(row, sizeof row, "\n| %s |", op_name(op));
  if (!strstr(page, row))
    lack(op, "no row \"| %s |\" in docs/operators.md (regenerate it: see its header)", op_name(op));
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_checklist scalar.h operators.md\n");
    return 2;
  }
  const char *scalar_h = read_text(argv[1]);
  const char *page = read_text(argv[2]);
  Graph *g = graph_new("checklist");
  Emitter e = {.g = g};
  int kinds = 0;
  for (int k = 1; k < OP_COUNT; k++) {
    OpKind op = (OpKind)k;
    const OpInfo *info = op_info(op);
    kinds++;
    if (!info->infer)
      lack(op, "no shape function (the row's infer)");
    if (!info->fold)
      lack(op, "no evaluator (the row's fold)%s",
           info->eval == AT_RUN_TIME ? "" : ": it cannot compile without one, as it folds always");
    check_emitters(&e, op);
    check_fused(&e, op, scalar_h);
    check_formula(&e, op, scalar_h);
    check_docs(op, page);
  }
  graph_free(g);
  printf("%d kinds, %d missing pieces\n", kinds, missing);
  return missing ? 1 : 0;
}
