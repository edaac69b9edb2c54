/*
 * nvToolsExt.h - NVTX ranges for opc's CPU runtime. Every operation
 * enqueued while a range is open on the calling thread is tagged with the
 * innermost range's text; the checking mode names nodes with it.
 */
#ifndef OPC_NVTOOLSEXT_H
#define OPC_NVTOOLSEXT_H

#ifdef __cplusplus
extern "C" {
#endif

/* Returns the depth of the range opened (0-based), as NVTX does. */
int nvtxRangePushA(const char *message);
/* Returns the depth of the range closed, or a negative value when none is open. */
int nvtxRangePop(void);
void nvtxMarkA(const char *message);

#ifdef __cplusplus
}
#endif

#endif
