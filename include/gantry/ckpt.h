/* C API of the Gantry checkpoint engine (see gantry/ckpt/manager.h for the
 * semantics). Handles are opaque; every call returns a gantry_ckpt_status
 * and, on failure, gantry_ckpt_last_error() returns the message for the
 * calling thread (valid until that thread's next call). */
#ifndef GANTRY_CKPT_H_
#define GANTRY_CKPT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GANTRY_CKPT_OK = 0,
  GANTRY_CKPT_INVALID_ARGUMENT = 1,
  GANTRY_CKPT_NOT_FOUND = 2,
  GANTRY_CKPT_ALREADY_EXISTS = 3,
  GANTRY_CKPT_DATA_LOSS = 4,
  GANTRY_CKPT_IO_ERROR = 5,
  GANTRY_CKPT_FAILED_PRECONDITION = 6,
  GANTRY_CKPT_RESOURCE_EXHAUSTED = 7,
  GANTRY_CKPT_INTERNAL = 8,
  GANTRY_CKPT_UNAVAILABLE = 9 /* an object store or IMDS did not answer (after retries) */
} gantry_ckpt_status;

/* Same numbering as gantry::ckpt::DType. */
typedef enum {
  GANTRY_DTYPE_BOOL = 0,
  GANTRY_DTYPE_U8,
  GANTRY_DTYPE_I8,
  GANTRY_DTYPE_I16,
  GANTRY_DTYPE_U16,
  GANTRY_DTYPE_F16,
  GANTRY_DTYPE_BF16,
  GANTRY_DTYPE_I32,
  GANTRY_DTYPE_U32,
  GANTRY_DTYPE_F32,
  GANTRY_DTYPE_F64,
  GANTRY_DTYPE_I64,
  GANTRY_DTYPE_U64,
  GANTRY_DTYPE_F8_E4M3,
  GANTRY_DTYPE_F8_E5M2
} gantry_dtype;

typedef struct gantry_ckpt_manager gantry_ckpt_manager;
typedef struct gantry_ckpt_loaded gantry_ckpt_loaded;

typedef struct {
  const char* name;
  gantry_dtype dtype;
  const int64_t* shape;
  size_t ndim;
  const void* data;
  size_t bytes;
} gantry_ckpt_tensor;

/* Message of the calling thread's last failed call ("" if none). */
const char* gantry_ckpt_last_error(void);

/* keep_last 0 keeps everything; verify is "full", "sample" or "none" (NULL: full). */
gantry_ckpt_status gantry_ckpt_open(const char* root, const char* run, int rank, int world_size,
                                    int keep_last, const char* verify, gantry_ckpt_manager** out);
/* Like gantry_ckpt_open, with tiering: `persist` is an object-store URL
 * ("az://acct/container/prefix", "file:///dir", a connection string; NULL or
 * "" for none) that committed steps are uploaded to in the background, with
 * its own retention (persist_keep_last, 0 keeps everything). `root` may
 * itself be a remote URL (direct mode, no local disk). */
gantry_ckpt_status gantry_ckpt_open_persist(const char* root, const char* run, int rank,
                                            int world_size, int keep_last, const char* verify,
                                            const char* persist, int persist_keep_last,
                                            gantry_ckpt_manager** out);
/* Closes the manager: waits for an in-flight save and for queued uploads. */
void gantry_ckpt_close(gantry_ckpt_manager* m);

/* metadata_json: a JSON object as text, or NULL. */
gantry_ckpt_status gantry_ckpt_save(gantry_ckpt_manager* m, int64_t step,
                                    const gantry_ckpt_tensor* tensors, size_t count,
                                    const char* metadata_json);
gantry_ckpt_status gantry_ckpt_save_async(gantry_ckpt_manager* m, int64_t step,
                                          const gantry_ckpt_tensor* tensors, size_t count,
                                          const char* metadata_json);
gantry_ckpt_status gantry_ckpt_wait(gantry_ckpt_manager* m);
/* Waits until every committed step is on the persist store; returns the
 * first upload error not reported yet. */
gantry_ckpt_status gantry_ckpt_wait_uploads(gantry_ckpt_manager* m);
/* Called once per Preempt/Terminate/Redeploy Scheduled Event with the event
 * as JSON (the IMDS document's fields), on the watcher thread. */
typedef void (*gantry_ckpt_eviction_fn)(void* user, const char* event_json);
/* Starts the Scheduled Events watcher (endpoint NULL: GANTRY_IMDS_ENDPOINT or
 * http://169.254.169.254; polled every second). fn NULL stops it. */
gantry_ckpt_status gantry_ckpt_on_eviction(gantry_ckpt_manager* m, const char* endpoint,
                                           gantry_ckpt_eviction_fn fn, void* user);
/* NOT_FOUND when no committed step verifies. */
gantry_ckpt_status gantry_ckpt_latest(gantry_ckpt_manager* m, int64_t* step);

/* step < 0: latest. names NULL (or count 0): all tensors. */
gantry_ckpt_status gantry_ckpt_load(gantry_ckpt_manager* m, int64_t step, const char* const* names,
                                    size_t name_count, gantry_ckpt_loaded** out);
int64_t gantry_ckpt_loaded_step(const gantry_ckpt_loaded* l);
size_t gantry_ckpt_loaded_count(const gantry_ckpt_loaded* l);
/* Fills *out with a view of tensor i; pointers stay valid until the loaded
 * handle is freed. */
gantry_ckpt_status gantry_ckpt_loaded_tensor(const gantry_ckpt_loaded* l, size_t i,
                                             gantry_ckpt_tensor* out);
/* The user metadata as JSON text (owned by the handle). */
const char* gantry_ckpt_loaded_metadata(const gantry_ckpt_loaded* l);
void gantry_ckpt_loaded_free(gantry_ckpt_loaded* l);

#ifdef __cplusplus
}
#endif

#endif /* GANTRY_CKPT_H_ */
