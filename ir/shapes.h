/*
 * shapes.h - private to ir/: what shape inference (ops.c) and the
 * compile-time evaluators (fold.c, fold_nn.c) share. Everything else reads a node's
 * resolved parameters (Node.p, Node.win) from ir.h.
 */
#ifndef OPC_IR_SHAPES_H
#define OPC_IR_SHAPES_H

#include "ir.h"

/* Shape: the range of dims it returns. */
void shape_range(const Node *n, int rank, int *start, int *end);

/* The sizes that only the values decide (fold.c), for the shape functions
   of NonZero and Unique (node->p.unique resolved). */
int64_t count_non_zero(const Tensor *x);
int64_t count_unique(const Node *n);

/* The compile-time evaluators of ops.def's fold column (fold.c). Each
   elementwise kind has its own, over a loop that the kinds of its family
   share. */
bool fold_relu(Graph *g, Node *n);
bool fold_leaky_relu(Graph *g, Node *n);
bool fold_elu(Graph *g, Node *n);
bool fold_selu(Graph *g, Node *n);
bool fold_celu(Graph *g, Node *n);
bool fold_sigmoid(Graph *g, Node *n);
bool fold_tanh(Graph *g, Node *n);
bool fold_hard_sigmoid(Graph *g, Node *n);
bool fold_hard_swish(Graph *g, Node *n);
bool fold_softplus(Graph *g, Node *n);
bool fold_softsign(Graph *g, Node *n);
bool fold_erf(Graph *g, Node *n);
bool fold_thresholded_relu(Graph *g, Node *n);
bool fold_shrink(Graph *g, Node *n);
bool fold_mish(Graph *g, Node *n);
bool fold_swish(Graph *g, Node *n);
bool fold_gelu(Graph *g, Node *n);
bool fold_exp(Graph *g, Node *n);
bool fold_log(Graph *g, Node *n);
bool fold_sqrt(Graph *g, Node *n);
bool fold_abs(Graph *g, Node *n);
bool fold_neg(Graph *g, Node *n);
bool fold_reciprocal(Graph *g, Node *n);
bool fold_floor(Graph *g, Node *n);
bool fold_ceil(Graph *g, Node *n);
bool fold_round(Graph *g, Node *n);
bool fold_sign(Graph *g, Node *n);
bool fold_sin(Graph *g, Node *n);
bool fold_cos(Graph *g, Node *n);
bool fold_tan(Graph *g, Node *n);
bool fold_asin(Graph *g, Node *n);
bool fold_acos(Graph *g, Node *n);
bool fold_atan(Graph *g, Node *n);
bool fold_sinh(Graph *g, Node *n);
bool fold_cosh(Graph *g, Node *n);
bool fold_asinh(Graph *g, Node *n);
bool fold_acosh(Graph *g, Node *n);
bool fold_atanh(Graph *g, Node *n);
bool fold_prelu(Graph *g, Node *n);
bool fold_clip(Graph *g, Node *n);
bool fold_add(Graph *g, Node *n);
bool fold_sub(Graph *g, Node *n);
bool fold_mul(Graph *g, Node *n);
bool fold_div(Graph *g, Node *n);
bool fold_pow(Graph *g, Node *n);
bool fold_sum(Graph *g, Node *n);
bool fold_max(Graph *g, Node *n);
bool fold_min(Graph *g, Node *n);
bool fold_mean(Graph *g, Node *n);
bool fold_mod(Graph *g, Node *n);
bool fold_copy(Graph *g, Node *n);
bool fold_dropout(Graph *g, Node *n);
bool fold_concat(Graph *g, Node *n);
bool fold_split(Graph *g, Node *n);
bool fold_slice(Graph *g, Node *n);
bool fold_transpose(Graph *g, Node *n);
bool fold_tile(Graph *g, Node *n);
bool fold_expand(Graph *g, Node *n);
bool fold_gather(Graph *g, Node *n);
bool fold_gather_elements(Graph *g, Node *n);
bool fold_trilu(Graph *g, Node *n);
bool fold_softmax(Graph *g, Node *n);
bool fold_hardmax(Graph *g, Node *n);
bool fold_reduce(Graph *g, Node *n);
bool fold_reduce_more(Graph *g, Node *n);
bool fold_cumsum(Graph *g, Node *n);
bool fold_constant(Graph *g, Node *n);
bool fold_shape(Graph *g, Node *n);
bool fold_cast(Graph *g, Node *n);
bool fold_constant_of_shape(Graph *g, Node *n);
bool fold_range(Graph *g, Node *n);
bool fold_eye_like(Graph *g, Node *n);
bool fold_size(Graph *g, Node *n);
bool fold_equal(Graph *g, Node *n);
bool fold_greater(Graph *g, Node *n);
bool fold_less(Graph *g, Node *n);
bool fold_greater_or_equal(Graph *g, Node *n);
bool fold_less_or_equal(Graph *g, Node *n);
bool fold_not(Graph *g, Node *n);
bool fold_and(Graph *g, Node *n);
bool fold_or(Graph *g, Node *n);
bool fold_xor(Graph *g, Node *n);
bool fold_bit_shift(Graph *g, Node *n);
bool fold_bitwise_and(Graph *g, Node *n);
bool fold_bitwise_or(Graph *g, Node *n);
bool fold_bitwise_xor(Graph *g, Node *n);
bool fold_bitwise_not(Graph *g, Node *n);
bool fold_is_nan(Graph *g, Node *n);
bool fold_is_inf(Graph *g, Node *n);
bool fold_where(Graph *g, Node *n);
bool fold_scatter_nd(Graph *g, Node *n);
bool fold_scatter_elements(Graph *g, Node *n);
bool fold_gather_nd(Graph *g, Node *n);
bool fold_one_hot(Graph *g, Node *n);
bool fold_arg(Graph *g, Node *n);
bool fold_topk(Graph *g, Node *n);
bool fold_non_zero(Graph *g, Node *n);
bool fold_unique(Graph *g, Node *n);

/* The network operators' evaluators (fold_nn.c). */
bool fold_conv(Graph *g, Node *n);
bool fold_conv_transpose(Graph *g, Node *n);
bool fold_batch_norm(Graph *g, Node *n);
bool fold_instance_norm(Graph *g, Node *n);
bool fold_layer_norm(Graph *g, Node *n);
bool fold_lrn(Graph *g, Node *n);
bool fold_mvn(Graph *g, Node *n);
bool fold_lp_norm(Graph *g, Node *n);
bool fold_pool(Graph *g, Node *n);
bool fold_global_pool(Graph *g, Node *n);
bool fold_pad(Graph *g, Node *n);
bool fold_gemm(Graph *g, Node *n);
bool fold_matmul(Graph *g, Node *n);
bool fold_depth_space(Graph *g, Node *n);
bool fold_resize(Graph *g, Node *n);
bool fold_nll_loss(Graph *g, Node *n);
bool fold_sce_loss(Graph *g, Node *n);

/* Row-major index <-> coordinates over dims (fold.c); a zero dim gives 0. */
void unravel(int64_t index, int rank, const int64_t *dims, int64_t *coord);
int64_t ravel(int rank, const int64_t *dims, const int64_t *coord);

/* MatMul's operands as numpy promotes them (ops.c): a 1-D A becomes a row
   and a 1-D B a column, into ad/bd (IR_MAX_RANK + 1 dims each); the dims
   added leave the result again. */
void matmul_operands(const Tensor *a, const Tensor *b, int64_t *ad, int *ar, int64_t *bd,
                     int *br);

#endif
