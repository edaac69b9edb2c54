/*
 * triton_api.h - the part of Triton Inference Server's C backend API that
 * libtriton_opc.so calls or implements, declared from Triton's
 * documentation of tritonbackend.h and tritonserver.h (as runtime/include
 * declares CUDA's). The server process defines the functions; the backend
 * links no Triton library and resolves them when tritonserver loads it.
 *
 * Every function returns NULL on success or an error the caller owns and
 * frees with TRITONSERVER_ErrorDelete. An error handed to
 * TRITONBACKEND_ResponseSend stays the caller's.
 */
#ifndef OPC_TRITON_API_H
#define OPC_TRITON_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Opaque handles, owned by the server. */
typedef struct TRITONSERVER_Error TRITONSERVER_Error;
typedef struct TRITONSERVER_Message TRITONSERVER_Message;
typedef struct TRITONBACKEND_Backend TRITONBACKEND_Backend;
typedef struct TRITONBACKEND_Model TRITONBACKEND_Model;
typedef struct TRITONBACKEND_ModelInstance TRITONBACKEND_ModelInstance;
typedef struct TRITONBACKEND_Request TRITONBACKEND_Request;
typedef struct TRITONBACKEND_Response TRITONBACKEND_Response;
typedef struct TRITONBACKEND_Input TRITONBACKEND_Input;
typedef struct TRITONBACKEND_Output TRITONBACKEND_Output;

/* The API major version this backend is written against. */
enum { TRITON_API_MAJOR = 1 };

typedef enum {
  TRITONSERVER_ERROR_UNKNOWN,
  TRITONSERVER_ERROR_INTERNAL,
  TRITONSERVER_ERROR_NOT_FOUND,
  TRITONSERVER_ERROR_INVALID_ARG,
  TRITONSERVER_ERROR_UNAVAILABLE,
  TRITONSERVER_ERROR_UNSUPPORTED,
  TRITONSERVER_ERROR_ALREADY_EXISTS
} TRITONSERVER_Error_Code;

typedef enum {
  TRITONSERVER_TYPE_INVALID,
  TRITONSERVER_TYPE_BOOL,
  TRITONSERVER_TYPE_UINT8,
  TRITONSERVER_TYPE_UINT16,
  TRITONSERVER_TYPE_UINT32,
  TRITONSERVER_TYPE_UINT64,
  TRITONSERVER_TYPE_INT8,
  TRITONSERVER_TYPE_INT16,
  TRITONSERVER_TYPE_INT32,
  TRITONSERVER_TYPE_INT64,
  TRITONSERVER_TYPE_FP16,
  TRITONSERVER_TYPE_FP32,
  TRITONSERVER_TYPE_FP64,
  TRITONSERVER_TYPE_BYTES,
  TRITONSERVER_TYPE_BF16
} TRITONSERVER_DataType;

typedef enum {
  TRITONSERVER_MEMORY_CPU,
  TRITONSERVER_MEMORY_CPU_PINNED,
  TRITONSERVER_MEMORY_GPU
} TRITONSERVER_MemoryType;

typedef enum {
  TRITONSERVER_INSTANCEGROUPKIND_AUTO,
  TRITONSERVER_INSTANCEGROUPKIND_CPU,
  TRITONSERVER_INSTANCEGROUPKIND_GPU,
  TRITONSERVER_INSTANCEGROUPKIND_MODEL
} TRITONSERVER_InstanceGroupKind;

typedef enum {
  TRITONSERVER_LOG_INFO,
  TRITONSERVER_LOG_WARN,
  TRITONSERVER_LOG_ERROR,
  TRITONSERVER_LOG_VERBOSE
} TRITONSERVER_LogLevel;

typedef enum { TRITONBACKEND_ARTIFACT_FILESYSTEM } TRITONBACKEND_ArtifactType;

enum { TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1 }; /* ResponseSend's flag */
enum { TRITONSERVER_REQUEST_RELEASE_ALL = 1 };     /* RequestRelease's flag */

/* tritonserver.h: errors, messages, logging. */
TRITONSERVER_Error *TRITONSERVER_ErrorNew(TRITONSERVER_Error_Code code, const char *msg);
void TRITONSERVER_ErrorDelete(TRITONSERVER_Error *error);
const char *TRITONSERVER_ErrorMessage(TRITONSERVER_Error *error);
TRITONSERVER_Error *TRITONSERVER_MessageSerializeToJson(TRITONSERVER_Message *message,
                                                        const char **base, size_t *byte_size);
TRITONSERVER_Error *TRITONSERVER_MessageDelete(TRITONSERVER_Message *message);
TRITONSERVER_Error *TRITONSERVER_LogMessage(TRITONSERVER_LogLevel level, const char *filename,
                                            int line, const char *msg);

/* tritonbackend.h: the server's side. */
TRITONSERVER_Error *TRITONBACKEND_ApiVersion(uint32_t *major, uint32_t *minor);
TRITONSERVER_Error *TRITONBACKEND_ModelName(TRITONBACKEND_Model *model, const char **name);
TRITONSERVER_Error *TRITONBACKEND_ModelVersion(TRITONBACKEND_Model *model, uint64_t *version);
TRITONSERVER_Error *TRITONBACKEND_ModelRepository(TRITONBACKEND_Model *model,
                                                  TRITONBACKEND_ArtifactType *artifact_type,
                                                  const char **location);
TRITONSERVER_Error *TRITONBACKEND_ModelConfig(TRITONBACKEND_Model *model, uint32_t config_version,
                                              TRITONSERVER_Message **model_config);
TRITONSERVER_Error *TRITONBACKEND_ModelSetState(TRITONBACKEND_Model *model, void *state);
TRITONSERVER_Error *TRITONBACKEND_ModelState(TRITONBACKEND_Model *model, void **state);
TRITONSERVER_Error *TRITONBACKEND_ModelInstanceModel(TRITONBACKEND_ModelInstance *instance,
                                                     TRITONBACKEND_Model **model);
TRITONSERVER_Error *TRITONBACKEND_ModelInstanceKind(TRITONBACKEND_ModelInstance *instance,
                                                    TRITONSERVER_InstanceGroupKind *kind);
TRITONSERVER_Error *TRITONBACKEND_ModelInstanceDeviceId(TRITONBACKEND_ModelInstance *instance,
                                                        int32_t *device_id);
TRITONSERVER_Error *TRITONBACKEND_ModelInstanceSetState(TRITONBACKEND_ModelInstance *instance,
                                                        void *state);
TRITONSERVER_Error *TRITONBACKEND_ModelInstanceState(TRITONBACKEND_ModelInstance *instance,
                                                     void **state);
TRITONSERVER_Error *TRITONBACKEND_ModelInstanceReportStatistics(
    TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request *request, bool success,
    uint64_t exec_start_ns, uint64_t compute_start_ns, uint64_t compute_end_ns,
    uint64_t exec_end_ns);
TRITONSERVER_Error *TRITONBACKEND_ModelInstanceReportBatchStatistics(
    TRITONBACKEND_ModelInstance *instance, uint64_t batch_size, uint64_t exec_start_ns,
    uint64_t compute_start_ns, uint64_t compute_end_ns, uint64_t exec_end_ns);

TRITONSERVER_Error *TRITONBACKEND_RequestInputCount(TRITONBACKEND_Request *request,
                                                    uint32_t *count);
TRITONSERVER_Error *TRITONBACKEND_RequestInputName(TRITONBACKEND_Request *request, uint32_t index,
                                                   const char **input_name);
TRITONSERVER_Error *TRITONBACKEND_RequestInput(TRITONBACKEND_Request *request, const char *name,
                                               TRITONBACKEND_Input **input);
TRITONSERVER_Error *TRITONBACKEND_RequestOutputCount(TRITONBACKEND_Request *request,
                                                     uint32_t *count);
TRITONSERVER_Error *TRITONBACKEND_RequestOutputName(TRITONBACKEND_Request *request,
                                                    uint32_t index, const char **output_name);
TRITONSERVER_Error *TRITONBACKEND_RequestRelease(TRITONBACKEND_Request *request,
                                                 uint32_t release_flags);
/* memory_type and memory_type_id: in, the caller's preference; out, what
   the buffer is. */
TRITONSERVER_Error *TRITONBACKEND_InputProperties(TRITONBACKEND_Input *input, const char **name,
                                                  TRITONSERVER_DataType *datatype,
                                                  const int64_t **shape, uint32_t *dims_count,
                                                  uint64_t *byte_size, uint32_t *buffer_count);
TRITONSERVER_Error *TRITONBACKEND_InputBuffer(TRITONBACKEND_Input *input, uint32_t index,
                                              const void **buffer, uint64_t *buffer_byte_size,
                                              TRITONSERVER_MemoryType *memory_type,
                                              int64_t *memory_type_id);
TRITONSERVER_Error *TRITONBACKEND_ResponseNew(TRITONBACKEND_Response **response,
                                              TRITONBACKEND_Request *request);
TRITONSERVER_Error *TRITONBACKEND_ResponseDelete(TRITONBACKEND_Response *response);
TRITONSERVER_Error *TRITONBACKEND_ResponseOutput(TRITONBACKEND_Response *response,
                                                 TRITONBACKEND_Output **output, const char *name,
                                                 TRITONSERVER_DataType datatype,
                                                 const int64_t *shape, uint32_t dims_count);
TRITONSERVER_Error *TRITONBACKEND_OutputBuffer(TRITONBACKEND_Output *output, void **buffer,
                                               uint64_t buffer_byte_size,
                                               TRITONSERVER_MemoryType *memory_type,
                                               int64_t *memory_type_id);
/* Takes the response; `error` (NULL: success) stays the caller's. */
TRITONSERVER_Error *TRITONBACKEND_ResponseSend(TRITONBACKEND_Response *response,
                                               uint32_t send_flags, TRITONSERVER_Error *error);

/* What the backend implements; the server looks them up by name. */
#define TRITON_EXPORT __attribute__((visibility("default")))
TRITON_EXPORT TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend);
TRITON_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model);
TRITON_EXPORT TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model);
TRITON_EXPORT TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance);
TRITON_EXPORT TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance);
TRITON_EXPORT TRITONSERVER_Error *
TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                   TRITONBACKEND_Request **requests, uint32_t request_count);

#endif
