/*
 * csi_proxy/plugin_abi.h: the whole contract between the csi-proxy host and an API-group library.
 *
 * A group library (a "plugin") is a shared object that exports exactly one symbol, csi_proxy_plugin_negotiate.
 * Everything else travels through the function tables below. The host owns gRPC, the sockets and the threads;
 * the plugin receives serialized protobuf request bytes and answers with serialized response bytes.
 *
 * Naming: csi_proxy_host_* is provided by the host, csi_proxy_plugin_* by the plugin. Ownership is stated at every
 * pointer: "host-owned" memory is never freed by the plugin and vice versa.
 *
 * Sequence:
 *   1. The host dlopen()s the library (RTLD_NOW | RTLD_LOCAL) and calls csi_proxy_plugin_negotiate() with the
 *      range of ABI versions it speaks. The plugin answers with the version it speaks, its group name, its own
 *      version and its csi_proxy_plugin_api table.
 *   2. The host calls api->init() once with the csi_proxy_host_api table. Inside init, and only there, the plugin
 *      registers its services with host->register_service(). init may fail; the host then logs the plugin's
 *      reason and skips the group or refuses to start, as its configuration says.
 *   3. For every call, the host invokes the registered handler on one of its worker threads. The handler must
 *      complete the call exactly once with host->complete_call(), before it returns or later from any thread.
 *   4. At shutdown the host stops accepting calls, waits for every started call to complete (up to its
 *      configured timeout), then calls api->shutdown(). The library is unloaded only after that, and never while
 *      a call into it can still be running.
 *
 * Negotiation rule: the host offers [abi_version_min, abi_version_max]; a library that speaks
 * [lib_min, lib_max] answers the newest version both sides speak, min(abi_version_max, lib_max), provided it is
 * not below max(abi_version_min, lib_min); otherwise it fails with FAILED_PRECONDITION. A library built against
 * this header speaks at least [CSI_PROXY_ABI_VERSION_MIN, CSI_PROXY_ABI_VERSION_CURRENT]; a library built
 * against a later header may speak later versions too, and still answers an older host with an older version.
 *
 * Struct versioning: every struct starts with `struct_size`, set by the side that fills it to sizeof() as that
 * side knows it. A reader copies min(struct_size, sizeof(its own struct)) into a zeroed struct, so a struct grows
 * only by appending fields, and a field that the other side does not know reads as zero. A struct shorter than
 * the fields that version 1 requires (its CSI_PROXY_*_V1_SIZE below) is refused as truncated. Arrays carry their
 * own stride (csi_proxy_service_desc.method_desc_size), so their elements grow the same way. A struct that one
 * side fills in the other side's memory (the negotiation answer, the peer credentials) is written only up to the
 * struct_size that memory's owner set, never further.
 *
 * Errors are values: csi_proxy_status_code uses gRPC's status codes. No C++ exception may cross this boundary.
 *
 * Concurrency: the host calls handlers on several worker threads at once, also several calls of the same method
 * at once, each with its own csi_proxy_host_call. A handler must be safe to run concurrently with itself and with
 * every other handler of the library; negotiate, init and shutdown are never called concurrently with anything.
 *
 * Group names: the group a library answers names its endpoints (csi-proxy-<group>-<version>) and must be 1 to
 * CSI_PROXY_GROUP_NAME_MAX lowercase ASCII letters and digits, starting with a letter (e.g. "disk", "smb",
 * "widget2"). The host refuses a library that answers any other name. It is the same syntax as the name of a
 * [groups.<name>] table in the host configuration, and it must be that table's name: the host refuses a library
 * that answers another group than the table it is configured under, so that no library claims another group's
 * name and endpoints.
 *
 * Sizes: a service has at most CSI_PROXY_MAX_METHODS_PER_SERVICE methods and a library registers at most
 * CSI_PROXY_MAX_SERVICES_PER_LIBRARY services (every version counts); register_service refuses more.
 *
 * ABI history (a new version only appends fields and functions; every CSI_PROXY_*_V1_SIZE stays as it is):
 *   version 1: first version. Since added without a new version, because they only write down what version 1
 *              already was: CSI_PROXY_ABI_VERSION_MIN, the CSI_PROXY_*_V1_SIZE and CSI_PROXY_GROUP_NAME_MAX
 *              constants, the remaining gRPC status codes, and the negotiation, concurrency and group-name
 *              rules above.
 *   version 2: appended csi_proxy_method_desc.flags (CSI_PROXY_METHOD_READ_ONLY) and
 *              csi_proxy_service_desc.file_descriptor_set/_size. A version-1 library reads as flags 0 (every
 *              method may change the node) and no descriptors (its services are served but not reflected).
 *              Bits of flags added since, without a new version, as the host ignores unknown bits:
 *              CSI_PROXY_METHOD_NONBLOCKING.
 *
 * Written down since, without a new version, as they only say what every version already was:
 *   - Step 4 in full: a call still running when the host's timeout ends is answered by the host (its handler's
 *     later complete_call is dropped), and its handler is never interrupted. While a call into a library may
 *     still be running, the host neither calls api->shutdown() nor unloads the library: a hung handler means no
 *     shutdown and no unload. The same holds for a group that a configuration reload removes or replaces (its
 *     old instance stays loaded, without shutdown) and for the host's exit (it exits without shutting the
 *     library down).
 *   - csi_proxy_host_api.init_flags (CSI_PROXY_INIT_CHECK_ONLY): appended to the host's table without a new
 *     version, since the host fills that table and a library reads a field only when struct_size covers it; a
 *     library that does not know the field runs a check's init as a start's (so an older library may still touch
 *     state during a check).
 *   - The [host] table of csi_proxy_host_api.config_toml holds exactly these keys: kubelet_path (a string),
 *     working_dirs (an array of strings), state_dir (a string) and group_name (the name of the [groups.<name>]
 *     table that configured the library; a host that refuses a library answering another group, as hosts since
 *     the "Group names" rule do, serves it only when this is the library's own group name). A library must not
 *     fail on a key it does not know there: a later host may add keys.
 *   - The group-name rule above (the table's name), and the sizes (CSI_PROXY_MAX_METHODS_PER_SERVICE,
 *     CSI_PROXY_MAX_SERVICES_PER_LIBRARY): every library of the API groups already kept within them.
 */
#ifndef CSI_PROXY_PLUGIN_ABI_H
#define CSI_PROXY_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CSI_PROXY_ABI_VERSION_1 1u
#define CSI_PROXY_ABI_VERSION_2 2u
/* The newest version this header describes. */
#define CSI_PROXY_ABI_VERSION_CURRENT CSI_PROXY_ABI_VERSION_2
/* The oldest version this header describes: the first one, for as long as every version only appends. */
#define CSI_PROXY_ABI_VERSION_MIN CSI_PROXY_ABI_VERSION_1

/* The longest group name (see "Group names" above), not counting the NUL. */
#define CSI_PROXY_GROUP_NAME_MAX 32

/* The most methods one service may have, and the most services one library may register (see "Sizes" above).
 * The API's largest service has about twenty methods; a library declaring hundreds of thousands would take
 * minutes to serve. */
#define CSI_PROXY_MAX_METHODS_PER_SERVICE 256
#define CSI_PROXY_MAX_SERVICES_PER_LIBRARY 64

/* The size of a struct up to and including `field`: a struct's version-1 minimum is this for its last
 * version-1 field (the CSI_PROXY_*_V1_SIZE constants below). */
#ifdef __cplusplus
#define CSI_PROXY_SIZE_THROUGH(type, field) (offsetof(type, field) + sizeof(type::field))
#else
#define CSI_PROXY_SIZE_THROUGH(type, field) (offsetof(type, field) + sizeof(((type*)0)->field))
#endif

/* The one symbol a group library exports. */
#define CSI_PROXY_PLUGIN_ENTRY_SYMBOL "csi_proxy_plugin_negotiate"

#if defined(_WIN32)
#define CSI_PROXY_PLUGIN_EXPORT __declspec(dllexport)
#else
#define CSI_PROXY_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* gRPC status codes, all of them, with gRPC's values. 0 is success; any other value is a failure whose meaning
 * follows gRPC. The host passes every one of them to the client as it is. */
typedef int32_t csi_proxy_status_code;
#define CSI_PROXY_STATUS_OK 0
#define CSI_PROXY_STATUS_CANCELLED 1
#define CSI_PROXY_STATUS_UNKNOWN 2
#define CSI_PROXY_STATUS_INVALID_ARGUMENT 3
#define CSI_PROXY_STATUS_DEADLINE_EXCEEDED 4
#define CSI_PROXY_STATUS_NOT_FOUND 5
#define CSI_PROXY_STATUS_ALREADY_EXISTS 6
#define CSI_PROXY_STATUS_PERMISSION_DENIED 7
#define CSI_PROXY_STATUS_RESOURCE_EXHAUSTED 8
#define CSI_PROXY_STATUS_FAILED_PRECONDITION 9
#define CSI_PROXY_STATUS_ABORTED 10
#define CSI_PROXY_STATUS_OUT_OF_RANGE 11
#define CSI_PROXY_STATUS_UNIMPLEMENTED 12
#define CSI_PROXY_STATUS_INTERNAL 13
#define CSI_PROXY_STATUS_UNAVAILABLE 14
#define CSI_PROXY_STATUS_DATA_LOSS 15
#define CSI_PROXY_STATUS_UNAUTHENTICATED 16

/* Log levels of host->log(). */
typedef int32_t csi_proxy_log_level;
#define CSI_PROXY_LOG_TRACE 0
#define CSI_PROXY_LOG_DEBUG 1
#define CSI_PROXY_LOG_INFO 2
#define CSI_PROXY_LOG_WARN 3
#define CSI_PROXY_LOG_ERROR 4

/* Host-owned opaque handles. */
typedef struct csi_proxy_host_context csi_proxy_host_context; /* one per loaded plugin; valid until shutdown returns */
typedef struct csi_proxy_host_call csi_proxy_host_call;       /* one per call; valid until complete_call returns */

/* ---------------------------------------------------------------------------------------------------------------
 * Negotiation (step 1)
 */

/* Filled by the host; read-only for the plugin; valid only during csi_proxy_plugin_negotiate. */
typedef struct csi_proxy_host_offer {
  size_t struct_size;
  uint32_t abi_version_min; /* the oldest ABI version the host speaks */
  uint32_t abi_version_max; /* the newest ABI version the host speaks */
  const char* host_version; /* host-owned, NUL-terminated, e.g. "0.1.0" */
} csi_proxy_host_offer;
#define CSI_PROXY_HOST_OFFER_V1_SIZE CSI_PROXY_SIZE_THROUGH(csi_proxy_host_offer, host_version)

struct csi_proxy_plugin_api;

/* Zeroed by the host with struct_size = sizeof() as the host knows it; filled by the plugin, which writes
 * min(struct_size, sizeof() as the plugin knows it) bytes and sets struct_size to the size it wrote (never more
 * than the host's struct_size; a host struct_size below CSI_PROXY_PLUGIN_ANSWER_V1_SIZE is refused). Every
 * pointer is plugin-owned and must stay valid until the library is unloaded (static storage is the normal
 * choice). */
typedef struct csi_proxy_plugin_answer {
  size_t struct_size;
  uint32_t abi_version; /* the version the plugin speaks, within the offered range */
  /* The group name follows "Group names" above. */
  const char* group;                      /* the API group, e.g. "disk": endpoints are csi-proxy-<group>-<version> */
  const char* plugin_version;             /* the library's own version, for logs, e.g. "1.2.0" */
  const struct csi_proxy_plugin_api* api; /* the plugin's function table */
} csi_proxy_plugin_answer;
#define CSI_PROXY_PLUGIN_ANSWER_V1_SIZE CSI_PROXY_SIZE_THROUGH(csi_proxy_plugin_answer, api)

/* The entry point. Returns CSI_PROXY_STATUS_OK, or a failure (FAILED_PRECONDITION when no offered version
 * suits the plugin). Even on failure the plugin should fill answer->abi_version and answer->group so that the
 * host can say what did not match. Must not throw. */
typedef csi_proxy_status_code (*csi_proxy_plugin_negotiate_fn)(const csi_proxy_host_offer* offer,
                                                               csi_proxy_plugin_answer* answer);

/* ---------------------------------------------------------------------------------------------------------------
 * Services (registered during init)
 */

/* Handles one call. `request` is host-owned and valid only until the handler returns (copy it to finish
 * later). `plugin_method_ctx` is the pointer given at registration. The handler runs on a host worker thread
 * and may block; it must eventually call host->complete_call(call, ...) exactly once. Handlers run
 * concurrently: other handlers of the library, and other calls of this same method (with the same
 * plugin_method_ctx), may be running on other threads at the same moment. */
typedef void (*csi_proxy_plugin_handler_fn)(void* plugin_method_ctx, csi_proxy_host_call* call, const uint8_t* request,
                                            size_t request_size);

/* Bits of csi_proxy_method_desc.flags. Unknown bits are ignored by the host. */
/* The method only reads: it changes nothing on the node (no mount, format, file, session or service state).
 * The host may let more callers reach it than the group's mutating methods (see the configuration's
 * read_only_uids and read_only_gids). A method without this bit counts as mutating. */
#define CSI_PROXY_METHOD_READ_ONLY (1u << 0)
/* The method never blocks: it answers (calls complete_call) before it returns, from memory, within
 * microseconds, with no system call that can wait (no file, device, mount, network or program). The host may
 * then run it inline on the thread that read the request instead of handing it to one of the group's worker
 * threads, which saves a thread hand-off per call; such a call takes none of the group's workers or queue places.
 * A handler with this bit that blocks stalls the host's I/O threads: when in doubt, leave it off. A host that
 * does not know the bit ignores it and runs the method on a worker, as every other. */
#define CSI_PROXY_METHOD_NONBLOCKING (1u << 1)

typedef struct csi_proxy_method_desc {
  size_t struct_size;
  const char* name; /* the RPC name, e.g. "PathExists"; the path is /<service_name>/<name> */
  csi_proxy_plugin_handler_fn handler;
  void* plugin_method_ctx; /* plugin-owned; must stay valid until shutdown returns */
  /* since version 2 */
  uint32_t flags; /* CSI_PROXY_METHOD_* bits */
} csi_proxy_method_desc;
#define CSI_PROXY_METHOD_DESC_V1_SIZE CSI_PROXY_SIZE_THROUGH(csi_proxy_method_desc, plugin_method_ctx)

/* One gRPC service of one API version. The host copies everything it needs during register_service. */
typedef struct csi_proxy_service_desc {
  size_t struct_size;
  const char* version;      /* e.g. "v1"; the service is served on endpoint csi-proxy-<group>-<version> */
  const char* service_name; /* the package-qualified service name, e.g. "v1.Filesystem" */
  const csi_proxy_method_desc* methods;
  size_t method_count;
  size_t method_desc_size; /* the array's stride: sizeof(csi_proxy_method_desc) as the plugin knows it */
  /* since version 2 */
  /* A serialized google.protobuf.FileDescriptorSet holding the .proto file that defines the service and every
   * file it imports, for gRPC server reflection and JSON tools; NULL with size 0 when the library has none.
   * Plugin-owned; the host copies it during register_service. The host refuses a service whose set does not
   * parse or does not define service_name with the registered methods. */
  const uint8_t* file_descriptor_set;
  size_t file_descriptor_set_size;
} csi_proxy_service_desc;
#define CSI_PROXY_SERVICE_DESC_V1_SIZE CSI_PROXY_SIZE_THROUGH(csi_proxy_service_desc, method_desc_size)

/* The connecting process, from the socket's SO_PEERCRED; -1 where unknown. */
typedef struct csi_proxy_peer_credentials {
  size_t struct_size;
  int64_t pid;
  int64_t uid;
  int64_t gid;
} csi_proxy_peer_credentials;
#define CSI_PROXY_PEER_CREDENTIALS_V1_SIZE CSI_PROXY_SIZE_THROUGH(csi_proxy_peer_credentials, gid)

/* ---------------------------------------------------------------------------------------------------------------
 * Host services (step 2 on), passed to init. The table and everything it points to is host-owned and valid
 * until shutdown returns. Every function is safe to call from any thread unless it says otherwise.
 */
typedef struct csi_proxy_host_api {
  size_t struct_size;
  uint32_t abi_version;         /* the version agreed in negotiation */
  csi_proxy_host_context* host; /* pass back as the first argument of the functions below */

  /* The group's configuration as a NUL-terminated TOML document with two tables: [host] holds the node-wide
   * settings every group may read (kubelet_path, working_dirs, state_dir) and [group] holds the keys of this
   * group's [groups.<name>] table in the host configuration, as the admin wrote them. */
  const char* config_toml;
  size_t config_toml_size;

  /* Writes one line to the host's log, tagged with the group. `message` need not be NUL-terminated. */
  void (*log)(csi_proxy_host_context* host, csi_proxy_log_level level, const char* message, size_t message_size);

  /* Registers one service. Only valid during init (later calls fail with FAILED_PRECONDITION). Fails with
   * ALREADY_EXISTS when another library already serves the same method path; the host logs both libraries. */
  csi_proxy_status_code (*register_service)(csi_proxy_host_context* host, const csi_proxy_service_desc* service);

  /* Completes a call: exactly once per call, from any thread. `message` (the status text, ignored on success)
   * and `response` (serialized response bytes, ignored on failure) are plugin-owned and copied before this
   * returns. After it returns, `call` is gone. */
  void (*complete_call)(csi_proxy_host_call* call, csi_proxy_status_code code, const char* message, size_t message_size,
                        const uint8_t* response, size_t response_size);

  /* The client's deadline as nanoseconds since the Unix epoch, or INT64_MAX when it set none. */
  int64_t (*call_deadline_unix_ns)(const csi_proxy_host_call* call);

  /* Non-zero once the client has cancelled the call or its deadline has passed. */
  int32_t (*call_is_cancelled)(const csi_proxy_host_call* call);

  /* Fills `out` (the caller sets out->struct_size) with the credentials of the connecting process. The host
   * writes only the fields it knows that fit within out->struct_size and leaves struct_size and every other
   * byte as the caller set them, so a caller presets the fields it reads to -1 ("unknown"). */
  void (*call_peer_credentials)(const csi_proxy_host_call* call, csi_proxy_peer_credentials* out);
  /* Appended without a new ABI version (see the history above): a library reads it only when the host's
   * struct_size covers it, and a host that does not know it leaves it out, which reads as 0. */
  uint32_t init_flags; /* CSI_PROXY_INIT_* bits: what this init is for */
} csi_proxy_host_api;
#define CSI_PROXY_HOST_API_V1_SIZE CSI_PROXY_SIZE_THROUGH(csi_proxy_host_api, call_peer_credentials)

/* Bits of csi_proxy_host_api.init_flags. Unknown bits are to be ignored by the library. */
/* This init is a check of the configuration (csi-proxy --check-config, csi-proxyctl check-config), perhaps beside a
 * host that serves the same configuration: validate the keys and register the services as for a start, but change
 * nothing on the node (create, remove, lock, chmod or clean up no file or directory, load no kernel module, start no
 * program). Reading is fine. shutdown follows at once; no call is made. */
#define CSI_PROXY_INIT_CHECK_ONLY (1u << 0)

/* ---------------------------------------------------------------------------------------------------------------
 * The plugin's table (returned by negotiation; plugin-owned, static storage).
 */
typedef struct csi_proxy_plugin_api {
  size_t struct_size;

  /* Called once, on the host's main thread, before any call. Registers services. On success stores the
   * plugin's own state pointer (plugin-owned, may be NULL) in *plugin_state and returns CSI_PROXY_STATUS_OK.
   * On failure writes a NUL-terminated reason of at most error_size bytes (including the NUL) into `error`
   * and returns another code; the host then never calls shutdown. */
  csi_proxy_status_code (*init)(const csi_proxy_host_api* host, void** plugin_state, char* error, size_t error_size);

  /* Called once, after every call has completed; releases what init created. */
  void (*shutdown)(void* plugin_state);
} csi_proxy_plugin_api;
#define CSI_PROXY_PLUGIN_API_V1_SIZE CSI_PROXY_SIZE_THROUGH(csi_proxy_plugin_api, shutdown)

/* The exported entry point of every group library. */
CSI_PROXY_PLUGIN_EXPORT csi_proxy_status_code csi_proxy_plugin_negotiate(const csi_proxy_host_offer* offer,
                                                                         csi_proxy_plugin_answer* answer);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CSI_PROXY_PLUGIN_ABI_H */
