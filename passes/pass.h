/*
 * pass.h - the entry function of every pass, for pipeline.c.
 * Each pass lives in its own file and is only called from the pipeline.
 */
#ifndef OPC_PASS_H
#define OPC_PASS_H

#include "passes.h"

/* simplification */
bool pass_fold_constants(Graph *g, const PassOptions *opt);
bool pass_remove_identity(Graph *g, const PassOptions *opt);
bool pass_eliminate_dead(Graph *g, const PassOptions *opt);
bool pass_eliminate_common(Graph *g, const PassOptions *opt);
bool pass_alias_reshape(Graph *g, const PassOptions *opt);
/* fusion */
bool pass_fold_batchnorm(Graph *g, const PassOptions *opt);
bool pass_fuse_bias(Graph *g, const PassOptions *opt);
bool pass_fuse_pad(Graph *g, const PassOptions *opt);
bool pass_fuse_activation(Graph *g, const PassOptions *opt);
bool pass_fuse_residual(Graph *g, const PassOptions *opt);
bool pass_concat_in_place(Graph *g, const PassOptions *opt);
/* inter-operator scheduling */
bool pass_merge_convs(Graph *g, const PassOptions *opt);
bool pass_schedule(Graph *g, const PassOptions *opt);
bool pass_sync(Graph *g, const PassOptions *opt);
bool pass_verify_schedule(Graph *g, const PassOptions *opt);
/* storage */
bool pass_plan_memory(Graph *g, const PassOptions *opt);

#endif
