/* A group library with bugs planted for csi-proxy-plugin-check to find, one chosen by its group key `bug`:
 *   "race"       GetCount aborts when two of its calls overlap (a deliberate check of a race, so that the
 *                concurrency check sees it every time, not once in a while);
 *   "crash"      Parse dereferences a null pointer when a length-delimited field claims more bytes than follow;
 *   "hang"       Parse never returns for a request whose first byte is 0xff;
 *   "leak"       init opens a descriptor and takes 8 MiB that shutdown never gives back;
 *   "late-twice" Slow, finishing after the host answered the call at its deadline, completes it twice;
 *   "socket"     init binds a socket of a fixed name (per process), so a second instance cannot start beside the
 *                serving one, as a reload starts it;
 *   "needs-net-raw"          GetCount opens a raw socket, which needs CAP_NET_RAW, and answers INTERNAL with the
 *                kernel's error when it is refused: fine as root, failing in a runner whose group does not declare
 *                the capability;
 *   "crash-without-net-raw"  the same, but it does not check the socket call and crashes (SIGSEGV) when refused;
 * and, in the build with BUGGY_NEEDS_V2 (negotiation comes before the keys), negotiation refuses a host that offers
 * only ABI version 1, though the library has nothing of version 2 it cannot do without;
 *   ""           none: the library conforms.
 * Its three methods are read-only, so the kit calls them with its defaults. No descriptors: the kit fuzzes it with
 * well-formed protobuf of no particular message. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "csi_proxy/plugin_abi.h"

#ifndef BUGGY_NEEDS_V2
#define BUGGY_NEEDS_V2 0
#endif

static csi_proxy_host_api host_table;
static char bug[32];
static atomic_int in_flight;
static int leaked_fd = -1;
static int bound_socket = -1;
static char* volatile leaked_memory; /* volatile: the compiler keeps what nothing reads */

static int bug_is(const char* name) { return strcmp(bug, name) == 0; }

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static void get_count(void* ctx, csi_proxy_host_call* call, const uint8_t* request, size_t size) {
  (void)ctx;
  (void)request;
  (void)size;
  if (atomic_fetch_add(&in_flight, 1) != 0 && bug_is("race")) abort();
  usleep(200);
  atomic_fetch_sub(&in_flight, 1);
  if (bug_is("needs-net-raw") || bug_is("crash-without-net-raw")) {
    const int raw = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
    if (raw < 0) {
      if (bug_is("crash-without-net-raw")) {
        volatile char* nowhere = NULL;
        *nowhere = 1;
      }
      char message[128];
      const int n = snprintf(message, sizeof message, "socket(AF_INET, SOCK_RAW): %s", strerror(errno));
      host_table.complete_call(call, CSI_PROXY_STATUS_INTERNAL, message, (size_t)n, NULL, 0);
      return;
    }
    close(raw);
  }
  host_table.complete_call(call, CSI_PROXY_STATUS_OK, NULL, 0, NULL, 0);
}

/* Reads the request's first field; a length-delimited one is checked against what follows, unless the bug says
 * otherwise. */
static void parse(void* ctx, csi_proxy_host_call* call, const uint8_t* request, size_t size) {
  (void)ctx;
  if (size > 0 && request[0] == 0xff && bug_is("hang")) {
    for (;;) sleep_ms(1000);
  }
  if (size >= 2 && (request[0] & 7) == 2) {
    size_t length = request[1] & 0x7f;
    if (length > size - 2) {
      if (bug_is("crash")) {
        volatile char* nowhere = NULL;
        *nowhere = (char)length;
      }
      host_table.complete_call(call, CSI_PROXY_STATUS_INVALID_ARGUMENT, "truncated field", 15, NULL, 0);
      return;
    }
  }
  host_table.complete_call(call, CSI_PROXY_STATUS_OK, NULL, 0, NULL, 0);
}

/* Works for 10 ms, or until 2 ms after the deadline when that is sooner, watching for cancellation. */
static void slow(void* ctx, csi_proxy_host_call* call, const uint8_t* request, size_t size) {
  (void)ctx;
  (void)request;
  (void)size;
  for (int i = 0; i < 10 && !host_table.call_is_cancelled(call); ++i) sleep_ms(1);
  if (host_table.call_is_cancelled(call)) {
    sleep_ms(2);
    host_table.complete_call(call, CSI_PROXY_STATUS_DEADLINE_EXCEEDED, "gave up", 7, NULL, 0);
    if (!bug_is("late-twice")) return;
  }
  host_table.complete_call(call, CSI_PROXY_STATUS_OK, NULL, 0, NULL, 0);
}

static csi_proxy_status_code init(const csi_proxy_host_api* host, void** plugin_state, char* error, size_t error_size) {
  if (host == NULL || host->struct_size < CSI_PROXY_HOST_API_V1_SIZE) return CSI_PROXY_STATUS_FAILED_PRECONDITION;
  memset(&host_table, 0, sizeof host_table);
  memcpy(&host_table, host, host->struct_size < sizeof host_table ? host->struct_size : sizeof host_table);
  /* The [group] table's `bug = "<name>"` (toml++ writes it with either quote). */
  bug[0] = '\0';
  const char* key = strstr(host->config_toml, "bug = ");
  if (key != NULL && (key[6] == '"' || key[6] == '\'')) {
    const char* end = strchr(key + 7, key[6]);
    size_t n = end != NULL ? (size_t)(end - (key + 7)) : 0;
    if (n < sizeof bug) {
      memcpy(bug, key + 7, n);
      bug[n] = '\0';
    }
  }
  if (bug_is("leak")) {
    leaked_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    leaked_memory = malloc(8u << 20);
    if (leaked_memory != NULL) memset(leaked_memory, 1, 8u << 20);
  }
  if (bug_is("socket")) {
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    /* An abstract name: nothing on disk, gone with the process. */
    int n = snprintf(address.sun_path + 1, sizeof address.sun_path - 1, "csi-proxy-buggy-%d", (int)getpid());
    bound_socket = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (bound_socket < 0 || bind(bound_socket, (struct sockaddr*)&address,
                                 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) != 0) {
      snprintf(error, error_size, "cannot bind the group's socket: %s", strerror(errno));
      if (bound_socket >= 0) close(bound_socket);
      bound_socket = -1;
      return CSI_PROXY_STATUS_UNAVAILABLE;
    }
  }
  static csi_proxy_method_desc methods[3];
  const char* names[3] = {"GetCount", "Parse", "Slow"};
  csi_proxy_plugin_handler_fn handlers[3] = {&get_count, &parse, &slow};
  for (int i = 0; i < 3; ++i) {
    methods[i].struct_size = sizeof methods[i];
    methods[i].name = names[i];
    methods[i].handler = handlers[i];
    methods[i].flags = CSI_PROXY_METHOD_READ_ONLY;
  }
  csi_proxy_service_desc service = {sizeof service, "v1", "v1.Buggy", methods, 3, sizeof methods[0], NULL, 0};
  *plugin_state = NULL;
  return host_table.register_service(host_table.host, &service);
}

static void shutdown_plugin(void* plugin_state) {
  (void)plugin_state;
  /* With the "leak" bug, leaked_fd and leaked_memory are forgotten here, as a careless library would. */
  leaked_fd = -1;
  leaked_memory = NULL;
  if (bound_socket >= 0) close(bound_socket);
  bound_socket = -1;
}

static const csi_proxy_plugin_api api = {sizeof api, &init, &shutdown_plugin};

CSI_PROXY_PLUGIN_EXPORT csi_proxy_status_code csi_proxy_plugin_negotiate(const csi_proxy_host_offer* offer,
                                                                         csi_proxy_plugin_answer* answer) {
  if (answer == NULL || answer->struct_size < CSI_PROXY_PLUGIN_ANSWER_V1_SIZE) return CSI_PROXY_STATUS_INVALID_ARGUMENT;
  answer->struct_size = CSI_PROXY_PLUGIN_ANSWER_V1_SIZE;
  answer->group = "buggy";
  answer->plugin_version = "1.0.0";
  /* The group key is not known yet at negotiation: "needs-v2" is this build's (BUGGY_NEEDS_V2). */
  const uint32_t lowest = BUGGY_NEEDS_V2 ? CSI_PROXY_ABI_VERSION_2 : CSI_PROXY_ABI_VERSION_1;
  if (offer == NULL || offer->abi_version_min > CSI_PROXY_ABI_VERSION_CURRENT || offer->abi_version_max < lowest) {
    answer->abi_version = CSI_PROXY_ABI_VERSION_CURRENT;
    return CSI_PROXY_STATUS_FAILED_PRECONDITION;
  }
  answer->abi_version =
      offer->abi_version_max < CSI_PROXY_ABI_VERSION_CURRENT ? offer->abi_version_max : CSI_PROXY_ABI_VERSION_CURRENT;
  answer->api = &api;
  return CSI_PROXY_STATUS_OK;
}
