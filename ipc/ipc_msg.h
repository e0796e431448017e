/*
 * The IPC message catalog: every message type, which roles may send it to
 * which, whether it carries a descriptor, and its body validator.  A frame
 * of an unknown type, from a role not allowed to send it, to a role not
 * allowed to receive it, or with a body its validator rejects closes the
 * channel.  Any change here bumps IPC_PROTO_VERSION in ipc.h.
 *
 * Bodies are msgpack arrays, fields in the order documented per type.
 */
#ifndef AGRIPPA_IPC_MSG_H
#define AGRIPPA_IPC_MSG_H

#include <limits.h>
#include <stdint.h>

#include "ipc.h"

#define CHILDREN_ALL                                                                        \
	(ROLE_BIT(ROLE_ENGINE) | ROLE_BIT(ROLE_HTTPD) | ROLE_BIT(ROLE_PROXY) |              \
	    ROLE_BIT(ROLE_RUNNER) | ROLE_BIT(ROLE_SANDBOX) | ROLE_BIT(ROLE_GITHELPER) |         \
	    ROLE_BIT(ROLE_EGRESS))
#define DB_CALLERS                                                                          \
	(ROLE_BIT(ROLE_ENGINE) | ROLE_BIT(ROLE_HTTPD) | ROLE_BIT(ROLE_PROXY) |              \
	    ROLE_BIT(ROLE_RUNNER))
#define SUP ROLE_BIT(ROLE_SUPERVISOR)
#define ANY_ROLE ((1u << ROLE__COUNT) - 1)
#define SBX ROLE_BIT(ROLE_SANDBOX)
/* Who may drive a sandbox: its run's runner, or an operator's agrippactl. */
#define SBX_DRIVERS (ROLE_BIT(ROLE_RUNNER) | ROLE_BIT(ROLE_CTL))

#define IPC_F_FD 0x1 /* the frame carries exactly one descriptor */

/* Limits the validators enforce. */
#define IPC_OPNAME_MAX 64
#define IPC_DB_MAXARGS 32
#define IPC_DB_ARG_MAX (1024 * 1024)
#define IPC_DB_MAXCOLS 256
#define IPC_DB_MAXROWS 10000
#define IPC_ERRMSG_MAX 1024
#define IPC_CTL_CMD_MAX 32
#define IPC_CTL_MAXARGS 16
#define IPC_CTL_ARG_MAX 4096
#define IPC_ADDR_MAX 256
#define IPC_INSTANCE_MAX 64
#define IPC_SBX_ID_MAX 32
#define IPC_SBX_PATH_MAX 4096     /* a workspace-relative path */
#define IPC_SBX_DATA_MAX (8u * 1024 * 1024) /* write data, edit strings */
#define IPC_SBX_MAXARGV 256
#define IPC_SBX_ARG_MAX (128 * 1024)
#define IPC_SBX_PATTERN_MAX 4096  /* glob and grep patterns */
#define IPC_SBX_NAME_MAX 128      /* artifact keys and file names */
#define IPC_SBX_KIND_MAX 32

/*
 *  X(symbol, number, senders, receivers, flags)
 *
 *  HELLO       [proto u32, role u32, verbose u32, devmode bool, uid u32, gid u32,
 *               chroot str(<=PATH_MAX-1; absolute, or "" for the proxy, which is
 *               not chrooted), instance str(<=IPC_INSTANCE_MAX)]
 *              first frame on every child channel; the child checks proto.
 *  READY       [proto u32, pid u32]   the child finished its setup.
 *  SHUTDOWN    []                     drain and exit.
 *  LOG_VERBOSE [level u32 (0..3)]
 *  DB_OP       [op str(<=IPC_OPNAME_MAX, [a-z0-9_]+), args array(<=IPC_DB_MAXARGS) of
 *               nil | bool | int | str(<=IPC_DB_ARG_MAX) | bin(<=IPC_DB_ARG_MAX)]
 *  DB_RESULT   [code u32, error str(<=IPC_ERRMSG_MAX), ncols u32(<=IPC_DB_MAXCOLS),
 *               rows array(<=IPC_DB_MAXROWS) of array(exactly ncols) of nil | str]
 *              code 0 = ok; see enum db_code.
 *  LISTEN_FD   [addr str(<=IPC_ADDR_MAX)]  + a listening socket.
 *  CHUNK       [stream u64, seq u32, last bool, data bin(<=IPC_CHUNK_SIZE)]
 *  CTL_REQUEST [cmd str(<=IPC_CTL_CMD_MAX), args array(<=IPC_CTL_MAXARGS) of
 *               str(<=IPC_CTL_ARG_MAX)]
 *  CTL_REPLY   [code u32, message str(<=IPC_ERRMSG_MAX*4), data any]
 *              code 0 = ok, otherwise an error and message says why.
 *  CTL_SANDBOX [id str(<=IPC_SBX_ID_MAX)]  + the driver's end of a new
 *              sandbox's channel (agrippactl sandbox run).
 *
 *  The sandbox channel.  The supervisor writes SBX_HELLO on it, then hands
 *  the other end to the sandbox's driver (a runner, or agrippactl) and never
 *  reads it.  Every request carries an id; exactly one terminal reply
 *  (SBX_RESULT, or SBX_EXIT for SBX_EXEC) echoes it, after any SBX_OUTPUT
 *  frames of that id.  Codes are errno values, 0 for success.
 *  SBX_HELLO   [proto u32, verbose u32, access u32 (0 readWrite, 1 readOnly),
 *               file_max u64, output_max u64, timeout_max_ms u32, artifact_max u64,
 *               id str(<=IPC_SBX_ID_MAX)]
 *  SBX_READY   [proto u32, pid u32]          to the driver: serving.
 *  SBX_READ    [path str, offset u64, limit u64]
 *              -> data [bytes bin, size u64]
 *  SBX_WRITE   [path str, data bin(<=IPC_SBX_DATA_MAX), mkdirs bool] -> data nil
 *  SBX_EDIT    [path str, old str(<=DATA_MAX), new str(<=DATA_MAX), count u32]
 *              -> data [replaced u32]
 *  SBX_LIST    [path str, max u32]  -> data [truncated bool, [[name, type, size]...]]
 *  SBX_GLOB    [pattern str, base str, max u32]
 *              -> data [truncated bool, [[path, type, size]...]]
 *  SBX_GREP    [regex str, path str, include str(<=IPC_SBX_NAME_MAX), icase bool,
 *               max u32] -> data [truncated bool, [[file, line u32, text]...]]
 *  SBX_STAT    [path str] -> data [type str, size u64, mode u32, mtime i64, nlink u32]
 *  SBX_EXEC    [shell bool, argv array(1..IPC_SBX_MAXARGV) of str(<=IPC_SBX_ARG_MAX),
 *               cwd str, timeout_ms u32]  (shell: argv is one string for /bin/sh -c;
 *               timeout 0: the sandbox's maximum, sandbox.exec_timeout)
 *              -> SBX_OUTPUT frames (stream 1 stdout, 2 stderr), then SBX_EXIT
 *  SBX_KILL    []   id names a running SBX_EXEC; no reply of its own.
 *  SBX_ARTIFACT [key str(<=IPC_SBX_NAME_MAX), kind str(<=IPC_SBX_KIND_MAX),
 *               name str(<=IPC_SBX_NAME_MAX), cap u64]
 *              -> SBX_OUTPUT frames (stream 0), then data [size u64, sha256 bin(32)]
 *  SBX_OUTPUT  [stream u32 (0..2), data bin(<=IPC_CHUNK_SIZE)]
 *  SBX_EXIT    [code u32, error str(<=IPC_ERRMSG_MAX), status i64 (exit status, -1 when
 *               signalled or not started), signal u32, timed_out bool, truncated bool,
 *               duration_ms u64, output_bytes u64]
 *  SBX_RESULT  [code u32, error str(<=IPC_ERRMSG_MAX), data any]
 *  (paths are str(<=IPC_SBX_PATH_MAX))
 *
 * Live events (supervisor -> httpd):
 *  RUN_WAKE    [run str (a canonical UUID, or "" for every run), seq u64]
 *              a wake-up only: an event of run up to seq may be in the
 *              database (NOTIFY run_events), or ("", 0) notifications may
 *              have been lost (the LISTEN connection was re-established).
 *              The receiver replays from the database; it never trusts seq.
 *  AUTH_FLUSH  []  a token, user or membership changed (NOTIFY auth_changed),
 *              or such notifications may have been lost: forget cached
 *              token lookups.
 *
 * Stored artifacts (httpd <-> supervisor; the reply has the request's id):
 *  ARTIFACT_OPEN [user str (UUID), artifact str (UUID)]  the supervisor
 *              checks in the database that user may read the artifact and
 *              opens its file in the content-addressed store
 *  ARTIFACT_FD  [size u64] + the file, opened read-only
 *  ARTIFACT_ERR [status u32: 404 not visible or not stored, 500 the store
 *              does not hold what the database says, 503 no database]
 *  REPO_SEAL   [token bin(1..IPC_SECRET_MAX)]  a repository token from the API
 *  REPO_SEALED [nonce bin(24), ciphertext bin(17..IPC_SECRET_MAX + 16)]
 *              the token sealed under the "reposecr" key
 *
 * The git helper (agrippa-git, one operation per process):
 *  GIT_FETCH   [url str(1..IPC_GIT_URL_MAX), token bin(0..IPC_SECRET_MAX),
 *               mirror str(1..IPC_GIT_PATH_MAX, absolute)]  the connection's
 *               mirror made, repaired or brought up to date from url
 *  GIT_CHECKOUT [mirror str(1..IPC_GIT_PATH_MAX, absolute), ref
 *               str(0..IPC_GIT_REF_MAX, printable, not starting with '-';
 *               "" for the default branch), workspace str(1..IPC_GIT_PATH_MAX,
 *               absolute), url str(1..IPC_GIT_URL_MAX) (the workspace's
 *               origin)]  the work tree of ref written from the mirror
 *  GIT_DIFF    [gitdir str(1..IPC_GIT_PATH_MAX, absolute), workspace
 *               str(1..IPC_GIT_PATH_MAX, absolute), base str(40 or 64 hex),
 *               cap u64, stats str(0..IPC_GIT_PATH_MAX, "" or absolute)]  + the
 *               file to write the patch to: the workspace against base, read
 *               from gitdir (the mirror) only; stats names the chowner's
 *               list of the workspace's entries as checked out (their lstat
 *               after the chown, githelper/stat.h), "" for none
 *  GIT_PUSH    [url str, token bin(<=IPC_SECRET_MAX; empty for none), username
 *               str(<=64), mirror str (absolute), workspace str (absolute), base str
 *               (40 or 64 hex), cap u64 (> 0), author_name str(1..IPC_PR_AUTHOR_MAX),
 *               author_email str(1..IPC_PR_AUTHOR_MAX), when u64, message
 *               str(1..IPC_PR_MESSAGE_MAX), branch str, lease str (as PR_PUSH),
 *               stats str (as GIT_DIFF)]
 *               the workspace's patch applied to base in the mirror and pushed;
 *               answered with PR_RESULT (commit, IPC_PR_F_EMPTY, IPC_PR_F_ALREADY)
 *  GIT_PR      [forge u32 (1 github, 2 gitlab), api_url str(1..IPC_PR_URL_MAX, https),
 *               url str (the connection's), token bin, head str, base str, title
 *               str, body str, draft bool, number u64]  open or update the pull
 *               request with libcurl; answered with PR_RESULT (number, url,
 *               IPC_PR_F_OPENED, IPC_PR_F_DRAFT, note)
 *  GIT_RESULT  [ok bool, error str(<=IPC_ERRMSG_MAX), base str(0, 40 or 64
 *               hex; empty when not ok), size u64 (the patch's bytes for
 *               GIT_DIFF, the mirror's for GIT_FETCH), ref
 *               str(0..IPC_GIT_REF_MAX; a checkout's resolved ref, empty
 *               when not ok)]
 *
 * The engine and runners (DESIGN 1, 3.4):
 *  ENGINE_WAKE [kind u32 (0 runs may be claimable: NOTIFY run_queued, or
 *               the LISTEN connection came back; 1 NOTIFY run_cancel),
 *               run str (a UUID, or "")]
 *  RUN_START   [run str (UUID), previous str(<=IPC_STATUS_MAX) (the status
 *               it was claimed from)]  engine -> supervisor: start a runner
 *               (and its sandbox, after the checkout when the run has none)
 *               for a run the engine claimed; the engine's instance id is
 *               the lease owner
 *  RUN_STOP    [run str, reason u32 (0 cancel requested, 1 lease lost)]
 *              cancel: the runner stops its step and ends the run
 *              cancelled; lease lost: the runner is killed at once
 *  RUN_ENDED   [run str, outcome u32 (IPC_RUN_*)]  supervisor -> engine:
 *              the run's runner (or its setup) is gone
 *  RUNNER_START [run str (UUID), owner str(1..IPC_INSTANCE_MAX), previous
 *               str(<=IPC_STATUS_MAX), exec_max_ms u32 (sandbox.exec_timeout:
 *               a longer step timeout is cut to it), step_budget u64
 *               (1..IPC_USD_MICROS_MAX: engine.step_budget, what an agent
 *               step attempt reserves when no budget applies)]  + the runner's end of
 *               its sandbox's channel.  The runner's channel is scoped to
 *               this run.
 *  RUNNER_CANCEL []  end the run cancelled now (kill the running command)
 *  RUNNER_DONE [outcome u32 (IPC_RUN_*)]  the runner is about to exit
 *  ARTIFACT_PUT [sha256 bin(32), data bin(1..)]  runner -> supervisor: an
 *               artifact too large for the database, for the store; the
 *               supervisor checks the digest
 *  PATCH_MAKE  [cap u64 (> 0)]  runner -> supervisor: the workspace's patch
 *               against the run's base commit, made by the git helper from
 *               the trusted copy, at most cap bytes
 *  RUNNER_REPLY [ok bool, error str(<=IPC_ERRMSG_MAX), size u64, sha256
 *               bin(0 or 32), data bin]  the answer to either (same id):
 *               PATCH_MAKE: size 0 for an empty patch; data holds the patch
 *               when size <= IPC_INLINE_MAX, else it is in the store
 *  PR_PUSH     [branch str(1..IPC_GIT_REF_MAX: a branch's short name), lease str
 *               (0, 40 or 64 hex: "" when the branch must not exist yet, else the
 *               commit the run pushed last), when u64 (the commit's time, seconds),
 *               message str(1..IPC_PR_MESSAGE_MAX)]  runner -> supervisor: the
 *               workspace's change as one commit on the base commit, pushed to
 *               BRANCH by a git helper (the supervisor adds the rest)
 *  PR_OPEN     [head str(1..IPC_GIT_REF_MAX), base str(1..IPC_GIT_REF_MAX), title
 *               str(1..IPC_PR_TITLE_MAX), body str(<=IPC_PR_BODY_MAX), draft bool,
 *               number u64 (the pull request recorded earlier, 0 for none)]
 *               runner -> supervisor: open or update head's pull request
 *  PR_RESULT   [ok bool, error str(<=IPC_ERRMSG_MAX), commit str(0, 40 or 64 hex),
 *               flags u32 (IPC_PR_F_*), number u64, url str(<=IPC_PR_URL_MAX),
 *               note str(<=IPC_PR_NOTE_MAX)]  the answer to either (same id),
 *               from the supervisor to the runner, and from the git helper to
 *               the supervisor for GIT_PUSH and GIT_PR
 *  ENGINE_CONF [concurrency u32 (0..1024: 0 claims nothing), lease u32 (2..3600 s), sweep u32
 *               (1..3600 s), host str (IPC_HOST_ID_LEN lower-case hex: STATE/host-id,
 *               the host the engine claims for)]  the engine's settings,
 *               after READY and after every reload
 *  HTTPD_CONF  [public_url str (<=IPC_PUBLIC_URL_MAX: "" or the origin, lower case),
 *               ui_dir str (an absolute path, <PATH_MAX), session_lifetime u32
 *               (60..2592000 s), user_rate u32 (0..100000 requests a second; 0: no
 *               limit), user_burst u32 (1..1000000), sse_queued_max u64 (1 MiB..16 GiB)]  httpd's settings, right after HELLO: it reads
 *               the dashboard's files from ui_dir before its chroot
 *
 * Model calls (DESIGN 1: the proxy holds the provider keys):
 *  PROXY_CONF  [providers array(<=IPC_PROVIDERS_MAX) of [name str (a provider name),
 *               kind u32 (0 anthropic, 1 openai), base_url str(1..IPC_URL_MAX, http:// or
 *               https://), key bin(0..IPC_SECRET_MAX, printable), timeout_s u32 (1..3600),
 *               retries u32 (0..10), stream bool, max_completion bool (the output
 *               limit is named max_completion_tokens; openai only),
 *               models array(1..IPC_MODELS_MAX) of
 *               [name str (a model name), input u64, output u64, cache_read u64,
 *               cache_write u64 (micro-dollars per million tokens, <= IPC_PRICE_MAX)]]]
 *              (no two providers of one name, no model twice in a provider)
 *              supervisor -> proxy, after READY and after every reload
 *  PROXY_CHANNEL [run str (UUID)]  + the proxy's end of a new runner's model
 *              channel: every call on it is that run's
 *  RUNNER_PROXY [provider str (a provider name, or "" for none), model str (a model
 *              name, or ""), max_tokens u32 (>= 1), tool_output_max u32
 *              (1024..1048576), mcp_tools_max u32 (0..IPC_MCP_TOOLS_MAX: the MCP
 *              tools one step offers), mcp_tool_bytes_max u32
 *              (1024..IPC_MCP_TOOL_BYTES_MAX: bytes of their definitions)]
 *              + the runner's end of its model channel; again
 *              whenever a new proxy is ready, with a channel to it (the runner
 *              keeps the values of the first)
 *  MODEL_CALL  [step str(1..64), attempt u32 (>= 1), provider str, model str,
 *              max_tokens u32 (>= 1), limit u64 (<= IPC_USD_MICROS_MAX: the most the
 *              call may cost), request str (the neutral request, JSON, with "base":
 *              how many messages of the step attempt's conversation earlier calls on
 *              this channel sent, which it continues; 0 with system and tools)]
 *              runner -> proxy
 *  MODEL_REPLY [code u32 (IPC_MODEL_*), error str(<=IPC_ERRMSG_MAX; "" when code is 0),
 *              cost u64 (<= IPC_USD_MICROS_MAX), worst u64 (<= IPC_USD_MICROS_MAX),
 *              usage array(4) of u64 (input, output, cache_read, cache_write tokens),
 *              stop u32 (0 end, 1 tool_use, 2 max_tokens, 3 other), content str (the
 *              response's content blocks, JSON; "" unless code is 0)]  proxy -> runner,
 *              the same id.  worst: what the proxy held the call could cost.
 *
 * MCP servers of a run's steps (DESIGN 4.2; supervisor/mcp_runs.c):
 *  MCP_START   [server str (an MCP server's name, [a-z0-9][a-z0-9_-]{0,63}), step str
 *              (1..64, the step's id)]  runner -> supervisor: start that server as it
 *              is pinned on the run, for the step; the id names the server's
 *              instance from now on (no two live at once)
 *  MCP_CHANNEL [what u32 (IPC_MCP_FD_*), transport u32 (1 stdio, 2 http), startup_ms
 *              u32 (1000..600000), call_ms u32 (1000..3600000)]  + a descriptor;
 *              supervisor -> runner, the start's id: for a stdio server the read end
 *              of its stderr first, then its channel (its stdin and stdout, as
 *              newline-delimited JSON-RPC), which ends the answer
 *  MCP_FAILED  [error str(1..IPC_ERRMSG_MAX), absent bool (the server is not pinned
 *              on the run)]  supervisor -> runner, the start's id: nothing was started
 *              (or what was started is gone)
 *  MCP_STOP    []  runner -> supervisor, the start's id: the runner has closed its
 *              ends; the server is stopped (EOF, then SIGTERM, then SIGKILL)
 *  PROXY_MCP   [run str (UUID), server str (an MCP server's name), url str
 *              (1..IPC_MCP_URL_MAX, http:// or https://), headers array
 *              (<=IPC_MCP_HEADERS_MAX) of bin ("Name: value", credentials expanded,
 *              <=IPC_MCP_HEADER_MAX), secrets array (<=IPC_MCP_SECRETS_MAX) of bin
 *              (8..IPC_SECRET_MAX: what to redact), call_ms u32 (1000..3600000)]
 *              + the proxy's end of a remote (http) MCP server's channel, whose
 *              other end the runner's MCP client has: the proxy speaks
 *              Streamable HTTP to the server for it (proxy/mcphttp.c)
 *
 * Metrics (supervisor <-> httpd; numbers only, never a name or an id):
 *  METRICS_FD  [addr str(<=IPC_ADDR_MAX)]  + the metrics_listen socket, on
 *              which httpd serves GET /metrics and nothing else
 *  METRICS_GET []  httpd asks for the supervisor's numbers
 *  METRICS     [values array(exactly IPC_METRIC__COUNT) of u64]  the reply,
 *              with the request's id, in the order of enum ipc_metric
 */
#define IPC_MSG_LIST(X)                                                                     \
	X(IMSG_HELLO, 1, SUP, CHILDREN_ALL, 0)                                              \
	X(IMSG_READY, 2, CHILDREN_ALL, SUP, 0)                                              \
	X(IMSG_SHUTDOWN, 3, SUP, CHILDREN_ALL, 0)                                           \
	X(IMSG_LOG_VERBOSE, 4, SUP, CHILDREN_ALL, 0)                                        \
	X(IMSG_DB_OP, 5, DB_CALLERS, SUP, 0)                                                \
	X(IMSG_DB_RESULT, 6, SUP, DB_CALLERS, 0)                                            \
	X(IMSG_LISTEN_FD, 7, SUP, ROLE_BIT(ROLE_HTTPD), IPC_F_FD)                            \
	X(IMSG_CHUNK, 8, ANY_ROLE, ANY_ROLE, 0)                                             \
	X(IMSG_CTL_REQUEST, 9, ROLE_BIT(ROLE_CTL), SUP, 0)                                  \
	X(IMSG_CTL_REPLY, 10, SUP, ROLE_BIT(ROLE_CTL), 0)                                   \
	X(IMSG_CTL_SANDBOX, 11, SUP, ROLE_BIT(ROLE_CTL), IPC_F_FD)                          \
	X(IMSG_SBX_HELLO, 12, SUP, SBX, 0)                                                  \
	X(IMSG_SBX_READY, 13, SBX, SBX_DRIVERS, 0)                                          \
	X(IMSG_SBX_READ, 14, SBX_DRIVERS, SBX, 0)                                           \
	X(IMSG_SBX_WRITE, 15, SBX_DRIVERS, SBX, 0)                                          \
	X(IMSG_SBX_EDIT, 16, SBX_DRIVERS, SBX, 0)                                           \
	X(IMSG_SBX_LIST, 17, SBX_DRIVERS, SBX, 0)                                           \
	X(IMSG_SBX_GLOB, 18, SBX_DRIVERS, SBX, 0)                                           \
	X(IMSG_SBX_GREP, 19, SBX_DRIVERS, SBX, 0)                                           \
	X(IMSG_SBX_STAT, 20, SBX_DRIVERS, SBX, 0)                                           \
	X(IMSG_SBX_EXEC, 21, SBX_DRIVERS, SBX, 0)                                           \
	X(IMSG_SBX_KILL, 22, SBX_DRIVERS, SBX, 0)                                           \
	X(IMSG_SBX_ARTIFACT, 23, SBX_DRIVERS, SBX, 0)                                       \
	X(IMSG_SBX_OUTPUT, 24, SBX, SBX_DRIVERS, 0)                                         \
	X(IMSG_SBX_EXIT, 25, SBX, SBX_DRIVERS, 0)                                           \
	X(IMSG_SBX_RESULT, 26, SBX, SBX_DRIVERS, 0)                                         \
	X(IMSG_RUN_WAKE, 27, SUP, ROLE_BIT(ROLE_HTTPD), 0)                                  \
	X(IMSG_ARTIFACT_OPEN, 28, ROLE_BIT(ROLE_HTTPD), SUP, 0)                              \
	X(IMSG_ARTIFACT_FD, 29, SUP, ROLE_BIT(ROLE_HTTPD), IPC_F_FD)                         \
	X(IMSG_ARTIFACT_ERR, 30, SUP, ROLE_BIT(ROLE_HTTPD), 0)                               \
	X(IMSG_AUTH_FLUSH, 31, SUP, ROLE_BIT(ROLE_HTTPD), 0)                                 \
	X(IMSG_REPO_SEAL, 32, ROLE_BIT(ROLE_HTTPD), SUP, 0)                                  \
	X(IMSG_REPO_SEALED, 33, SUP, ROLE_BIT(ROLE_HTTPD), 0)                                \
	X(IMSG_GIT_CHECKOUT, 34, SUP, ROLE_BIT(ROLE_GITHELPER), 0)                           \
	X(IMSG_GIT_RESULT, 35, ROLE_BIT(ROLE_GITHELPER), SUP, 0)                           \
	X(IMSG_GIT_DIFF, 36, SUP, ROLE_BIT(ROLE_GITHELPER), IPC_F_FD)                        \
	X(IMSG_ENGINE_WAKE, 37, SUP, ROLE_BIT(ROLE_ENGINE), 0)                               \
	X(IMSG_RUN_START, 38, ROLE_BIT(ROLE_ENGINE), SUP, 0)                                 \
	X(IMSG_RUN_STOP, 39, ROLE_BIT(ROLE_ENGINE), SUP, 0)                                  \
	X(IMSG_RUN_ENDED, 40, SUP, ROLE_BIT(ROLE_ENGINE), 0)                                 \
	X(IMSG_RUNNER_START, 41, SUP, ROLE_BIT(ROLE_RUNNER), IPC_F_FD)                       \
	X(IMSG_RUNNER_CANCEL, 42, SUP, ROLE_BIT(ROLE_RUNNER), 0)                             \
	X(IMSG_RUNNER_DONE, 43, ROLE_BIT(ROLE_RUNNER), SUP, 0)                               \
	X(IMSG_ENGINE_CONF, 44, SUP, ROLE_BIT(ROLE_ENGINE), 0)                               \
	X(IMSG_ARTIFACT_PUT, 45, ROLE_BIT(ROLE_RUNNER), SUP, 0)                              \
	X(IMSG_PATCH_MAKE, 46, ROLE_BIT(ROLE_RUNNER), SUP, 0)                                \
	X(IMSG_RUNNER_REPLY, 47, SUP, ROLE_BIT(ROLE_RUNNER), 0)                             \
	X(IMSG_PROXY_CONF, 48, SUP, ROLE_BIT(ROLE_PROXY), 0)                                 \
	X(IMSG_PROXY_CHANNEL, 49, SUP, ROLE_BIT(ROLE_PROXY), IPC_F_FD)                       \
	X(IMSG_RUNNER_PROXY, 50, SUP, ROLE_BIT(ROLE_RUNNER), IPC_F_FD)                       \
	X(IMSG_MODEL_CALL, 51, ROLE_BIT(ROLE_RUNNER), ROLE_BIT(ROLE_PROXY), 0)               \
	X(IMSG_MODEL_REPLY, 52, ROLE_BIT(ROLE_PROXY), ROLE_BIT(ROLE_RUNNER), 0)               \
	X(IMSG_GIT_FETCH, 53, SUP, ROLE_BIT(ROLE_GITHELPER), 0)                              \
	X(IMSG_PR_PUSH, 54, ROLE_BIT(ROLE_RUNNER), SUP, 0)                                   \
	X(IMSG_PR_OPEN, 55, ROLE_BIT(ROLE_RUNNER), SUP, 0)                                   \
	X(IMSG_PR_RESULT, 56, SUP | ROLE_BIT(ROLE_GITHELPER), SUP | ROLE_BIT(ROLE_RUNNER), 0) \
	X(IMSG_GIT_PUSH, 57, SUP, ROLE_BIT(ROLE_GITHELPER), 0)                               \
	X(IMSG_GIT_PR, 58, SUP, ROLE_BIT(ROLE_GITHELPER), 0)                                 \
	X(IMSG_EGRESS_CONF, 59, SUP, ROLE_BIT(ROLE_EGRESS), 0)                               \
	X(IMSG_EGRESS_RUN, 60, SUP, ROLE_BIT(ROLE_EGRESS), IPC_F_FD)                         \
	X(IMSG_EGRESS_POLICY, 61, SUP, ROLE_BIT(ROLE_EGRESS), 0)                             \
	X(IMSG_EGRESS_END, 62, SUP, ROLE_BIT(ROLE_EGRESS), 0)                                \
	X(IMSG_EGRESS_EVENT, 63, ROLE_BIT(ROLE_EGRESS), SUP, 0)                              \
	X(IMSG_HTTPD_CONF, 64, SUP, ROLE_BIT(ROLE_HTTPD), 0)                                 \
	X(IMSG_EGRESS_STEP, 65, SUP, ROLE_BIT(ROLE_EGRESS), 0)                               \
	X(IMSG_EGRESS_TOTALS, 66, ROLE_BIT(ROLE_EGRESS), SUP, 0)                              \
	X(IMSG_MCP_START, 67, ROLE_BIT(ROLE_RUNNER), SUP, 0)                                 \
	X(IMSG_MCP_CHANNEL, 68, SUP, ROLE_BIT(ROLE_RUNNER), IPC_F_FD)                        \
	X(IMSG_MCP_FAILED, 69, SUP, ROLE_BIT(ROLE_RUNNER), 0)                                \
	X(IMSG_MCP_STOP, 70, ROLE_BIT(ROLE_RUNNER), SUP, 0)                                  \
	X(IMSG_PROXY_MCP, 71, SUP, ROLE_BIT(ROLE_PROXY), IPC_F_FD)                           \
	IPC_MSG_LIST_METRICS(X)

/* GET /metrics (the numbers follow on from the list above, which has no gaps) */
#define IPC_MSG_LIST_METRICS(X)                                                             \
	X(IMSG_METRICS_FD, 72, SUP, ROLE_BIT(ROLE_HTTPD), IPC_F_FD)                           \
	X(IMSG_METRICS_GET, 73, ROLE_BIT(ROLE_HTTPD), SUP, 0)                                 \
	X(IMSG_METRICS, 74, SUP, ROLE_BIT(ROLE_HTTPD), 0)

enum ipc_msg_type {
#define IPC_X_ENUM(sym, num, snd, rcv, fl) sym = num,
	IPC_MSG_LIST(IPC_X_ENUM)
#undef IPC_X_ENUM
	IMSG__MAX
};

enum db_code {
	DB_OK = 0,
	DB_ERR_UNKNOWN_OP = 1, /* no such operation */
	DB_ERR_DENIED = 2,     /* the caller's role may not call it */
	DB_ERR_ARGS = 3,       /* wrong argument count or type */
	DB_ERR_UNAVAILABLE = 4,/* no database connection */
	DB_ERR_QUERY = 5,      /* the statement failed (constraint, etc.) */
	DB_ERR_TOO_LARGE = 6,  /* result exceeds the reply limits */
	DB_ERR_KEY_ROTATED = 7,/* a secret sealed under a master key that a rotation
	                          retired meanwhile (SQLSTATE AGK01, 0013_key_state.sql):
	                          nothing changed; sent again it is sealed anew */
};

struct ipc_msg_info {
	uint32_t type;
	const char *name;
	uint32_t senders;   /* ROLE_BIT mask */
	uint32_t receivers; /* ROLE_BIT mask */
	uint32_t flags;
	/* Returns 0 when body (an array) is valid for this type, -1 otherwise. */
	int (*validate)(const msgpack_object *body);
};

/* The catalog entry for type, or NULL when the type is unknown. */
const struct ipc_msg_info *ipc_msg_lookup(uint32_t type);
const char *ipc_msg_name(uint32_t type); /* "unknown" for unknown types */

/*
 * Full check of a decoded frame travelling from -> to: known type, roles
 * allowed, has_fd matching IPC_F_FD, body valid.  Returns 0 or -1 with *err
 * set to a static reason.
 */
int ipc_msg_check(const struct ipc_msg *m, enum ipc_role from, enum ipc_role to, int has_fd,
    const char **err);

/* Typed decoders: the validators are these with the result discarded.  Each
 * returns 0 or -1; strings point into the message and are not NUL-terminated
 * unless copied into a fixed array here. */
struct ipc_hello {
	uint32_t proto, role, verbose;
	int devmode;
	uint32_t uid, gid;
	char chroot[PATH_MAX];
	char instance[IPC_INSTANCE_MAX + 1];
};
int ipc_dec_hello(const msgpack_object *body, struct ipc_hello *out);

struct ipc_ready {
	uint32_t proto, pid;
};
int ipc_dec_ready(const msgpack_object *body, struct ipc_ready *out);

int ipc_dec_log_verbose(const msgpack_object *body, uint32_t *level);

struct ipc_db_op {
	char op[IPC_OPNAME_MAX + 1];
	struct ipc_cur args; /* positioned at the first argument */
	uint32_t nargs;
};
int ipc_dec_db_op(const msgpack_object *body, struct ipc_db_op *out);

struct ipc_db_result {
	uint32_t code, ncols, nrows;
	const char *error;
	size_t errlen;
	struct ipc_cur rows; /* each element: array of ncols nil|str */
};
int ipc_dec_db_result(const msgpack_object *body, struct ipc_db_result *out);

int ipc_dec_listen_fd(const msgpack_object *body, char *addr, size_t addrsz);

/*
 * IMSG_METRICS: the supervisor's numbers for GET /metrics, in this order.
 * The latency buckets count database operations whose time from submission
 * to result was at most IPC_METRIC_DB_BOUNDS_US[i] microseconds and more
 * than the bound before (the last: more than every bound), not cumulated.
 * The per-child values are indexed by enum ipc_metric_child.
 */
enum ipc_metric_child {
	IPC_MCHILD_ENGINE,
	IPC_MCHILD_HTTPD,
	IPC_MCHILD_PROXY,
	IPC_MCHILD_EGRESS,
	IPC_MCHILD_RUNNER,
	IPC_MCHILD_POSTGRES,
	IPC_MCHILD__COUNT
};
#define IPC_METRIC_DB_NBOUNDS 10
#define IPC_METRIC_DB_BOUNDS_US                                                             \
	{ 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 1000000 }
enum ipc_metric {
	IPC_METRIC_SBX_LIVE,        /* sandboxes now */
	IPC_METRIC_SBX_STARTED,     /* sandboxes built since the start */
	IPC_METRIC_EGRESS_ALLOWED,  /* egress decisions since the start */
	IPC_METRIC_EGRESS_DENIED,
	IPC_METRIC_EGRESS_TUNNELS,  /* tunnels open now */
	IPC_METRIC_DB_POOL_SIZE,    /* connections configured */
	IPC_METRIC_DB_POOL_READY,   /* connected (idle or busy) */
	IPC_METRIC_DB_POOL_BUSY,    /* running an operation */
	IPC_METRIC_DB_QUEUED,       /* operations waiting for a connection */
	IPC_METRIC_DB_OPS_OK,       /* operations finished, by result */
	IPC_METRIC_DB_OPS_ERROR,
	IPC_METRIC_DB_OPS_UNAVAILABLE,
	IPC_METRIC_DB_LATENCY_SUM_US,
	IPC_METRIC_DB_LATENCY_BUCKET, /* IPC_METRIC_DB_NBOUNDS + 1 values */
	IPC_METRIC_RESTARTS = IPC_METRIC_DB_LATENCY_BUCKET + IPC_METRIC_DB_NBOUNDS + 1,
	IPC_METRIC_IPC_ERRORS = IPC_METRIC_RESTARTS + IPC_MCHILD__COUNT,
	IPC_METRIC__COUNT = IPC_METRIC_IPC_ERRORS + IPC_MCHILD__COUNT
};
/* IMSG_METRICS into v (IPC_METRIC__COUNT values). */
int ipc_dec_metrics(const msgpack_object *body, uint64_t *v);
int ipc_dec_metrics_get(const msgpack_object *body);

#define IPC_UUID_LEN 36
/* IMSG_RUN_WAKE: run gets the id NUL-terminated ("" for every run). */
int ipc_dec_run_wake(const msgpack_object *body, char run[IPC_UUID_LEN + 1], uint64_t *seq);
int ipc_dec_auth_flush(const msgpack_object *body);
#define IPC_GIT_URL_MAX 2048
#define IPC_GIT_PATH_MAX 1024
#define IPC_GIT_REF_MAX 255
struct ipc_git_fetch {
	char url[IPC_GIT_URL_MAX + 1];
	const uint8_t *token; /* points into the message; len 0 for none */
	size_t toklen;
	char mirror[IPC_GIT_PATH_MAX + 1];
};
int ipc_dec_git_fetch(const msgpack_object *body, struct ipc_git_fetch *out);
struct ipc_git_checkout {
	char mirror[IPC_GIT_PATH_MAX + 1];
	char ref[IPC_GIT_REF_MAX + 1]; /* "" for the default branch */
	char workspace[IPC_GIT_PATH_MAX + 1];
	char url[IPC_GIT_URL_MAX + 1];
};
int ipc_dec_git_checkout(const msgpack_object *body, struct ipc_git_checkout *out);
struct ipc_git_result {
	int ok;
	const char *error;
	size_t errlen;
	char base[65];
	uint64_t size;
	char ref[IPC_GIT_REF_MAX + 1];
};
int ipc_dec_git_result(const msgpack_object *body, struct ipc_git_result *out);
struct ipc_git_diff {
	char gitdir[IPC_GIT_PATH_MAX + 1];
	char workspace[IPC_GIT_PATH_MAX + 1];
	char base[65];
	uint64_t cap;
	char stats[IPC_GIT_PATH_MAX + 1]; /* "" for none */
};
int ipc_dec_git_diff(const msgpack_object *body, struct ipc_git_diff *out);

/* Pull requests (PR_PUSH, PR_OPEN, PR_RESULT, GIT_PUSH, GIT_PR). */
#define IPC_PR_MESSAGE_MAX 4096
#define IPC_PR_TITLE_MAX 1024
#define IPC_PR_BODY_MAX (256 * 1024)
#define IPC_PR_URL_MAX 1024
#define IPC_PR_NOTE_MAX 256
#define IPC_PR_AUTHOR_MAX 256
#define IPC_PR_USER_MAX 64
enum {
	IPC_PR_F_EMPTY = 1,   /* the patch is empty: nothing pushed */
	IPC_PR_F_ALREADY = 2, /* the branch was at the commit already: nothing sent */
	IPC_PR_F_OPENED = 4,  /* the pull request was opened now (else updated) */
	IPC_PR_F_DRAFT = 8,   /* ... and is a draft on the forge */
	IPC_PR_F_ALL = 15
};
enum { IPC_FORGE_GITHUB = 1, IPC_FORGE_GITLAB = 2 };
struct ipc_pr_push {
	char branch[IPC_GIT_REF_MAX + 1];
	char lease[65];
	uint64_t when;
	const char *message; /* points into the message */
	size_t messagelen;
};
int ipc_dec_pr_push(const msgpack_object *body, struct ipc_pr_push *out);
struct ipc_pr_open {
	char head[IPC_GIT_REF_MAX + 1];
	char base[IPC_GIT_REF_MAX + 1];
	const char *title, *body; /* point into the message */
	size_t titlelen, bodylen;
	int draft;
	uint64_t number;
};
int ipc_dec_pr_open(const msgpack_object *body, struct ipc_pr_open *out);
struct ipc_pr_result {
	int ok;
	const char *error;
	size_t errlen;
	char commit[65];
	uint32_t flags;
	uint64_t number;
	char url[IPC_PR_URL_MAX + 1];
	char note[IPC_PR_NOTE_MAX + 1];
};
int ipc_dec_pr_result(const msgpack_object *body, struct ipc_pr_result *out);
struct ipc_git_push {
	char url[IPC_GIT_URL_MAX + 1];
	const uint8_t *token; /* points into the message; len 0 for none */
	size_t toklen;
	char username[IPC_PR_USER_MAX + 1];
	char mirror[IPC_GIT_PATH_MAX + 1];
	char workspace[IPC_GIT_PATH_MAX + 1];
	char base[65];
	uint64_t cap;
	char author_name[IPC_PR_AUTHOR_MAX + 1];
	char author_email[IPC_PR_AUTHOR_MAX + 1];
	uint64_t when;
	const char *message; /* points into the message, not NUL-terminated */
	size_t messagelen;
	char branch[IPC_GIT_REF_MAX + 1];
	char lease[65];
	char stats[IPC_GIT_PATH_MAX + 1]; /* "" for none */
};
int ipc_dec_git_push(const msgpack_object *body, struct ipc_git_push *out);
struct ipc_git_pr {
	uint32_t forge;
	char api_url[IPC_PR_URL_MAX + 1];
	char url[IPC_GIT_URL_MAX + 1];
	const uint8_t *token;
	size_t toklen;
	char head[IPC_GIT_REF_MAX + 1];
	char base[IPC_GIT_REF_MAX + 1];
	const char *title, *body; /* point into the message */
	size_t titlelen, bodylen;
	int draft;
	uint64_t number;
};
int ipc_dec_git_pr(const msgpack_object *body, struct ipc_git_pr *out);

#define IPC_STATUS_MAX 32
#define IPC_HOST_ID_LEN 32 /* STATE/host-id: lower-case hex */
#define IPC_USD_MICROS_MAX 100000000000ull /* 100000 USD, the templates' range */
/* RUN_ENDED and RUNNER_DONE outcomes */
enum {
	IPC_RUN_FINISHED = 0, /* the run ended (succeeded, failed, cancelled) */
	IPC_RUN_PARKED = 1,   /* waiting for an approval; the lease was handed back */
	IPC_RUN_STOPPED = 2,  /* stopped with the run live (drain, lost lease): claim it again */
	IPC_RUN_CRASHED = 3,  /* the runner died, or its setup failed and left the run live */
	IPC_RUN__MAX = 3
};
/* ENGINE_WAKE kinds and RUN_STOP reasons */
enum { IPC_WAKE_CLAIM = 0, IPC_WAKE_CANCEL = 1 };
enum { IPC_STOP_CANCEL = 0, IPC_STOP_LEASE = 1 };
int ipc_dec_engine_wake(const msgpack_object *body, uint32_t *kind, char run[IPC_UUID_LEN + 1]);
int ipc_dec_run_start(const msgpack_object *body, char run[IPC_UUID_LEN + 1],
                      char previous[IPC_STATUS_MAX + 1]);
int ipc_dec_run_stop(const msgpack_object *body, char run[IPC_UUID_LEN + 1], uint32_t *reason);
int ipc_dec_run_ended(const msgpack_object *body, char run[IPC_UUID_LEN + 1], uint32_t *outcome);
struct ipc_runner_start {
	char run[IPC_UUID_LEN + 1];
	char owner[IPC_INSTANCE_MAX + 1];
	char previous[IPC_STATUS_MAX + 1];
	uint32_t exec_max_ms;
	uint64_t step_budget; /* micro-dollars */
};
int ipc_dec_runner_start(const msgpack_object *body, struct ipc_runner_start *out);
int ipc_dec_runner_cancel(const msgpack_object *body);
int ipc_dec_runner_done(const msgpack_object *body, uint32_t *outcome);
struct ipc_engine_conf {
	uint32_t concurrency, lease, sweep;
	char host[IPC_HOST_ID_LEN + 1];
	uint32_t host_grace;
};
int ipc_dec_engine_conf(const msgpack_object *body, struct ipc_engine_conf *out);

#define IPC_PUBLIC_URL_MAX 255
struct ipc_httpd_conf {
	char public_url[IPC_PUBLIC_URL_MAX + 1];
	char ui_dir[PATH_MAX];
	uint32_t session_lifetime;
	uint32_t user_rate, user_burst;
	uint64_t sse_queued_max;
};
int ipc_dec_httpd_conf(const msgpack_object *body, struct ipc_httpd_conf *out);
#define IPC_INLINE_MAX (256 * 1024) /* artifacts up to this size live in the database */
int ipc_dec_artifact_put(const msgpack_object *body, const uint8_t **sha, const uint8_t **data,
                         size_t *len);
int ipc_dec_patch_make(const msgpack_object *body, uint64_t *cap);
struct ipc_runner_reply {
	int ok;
	const char *error;
	size_t errlen;
	uint64_t size;
	const uint8_t *sha256; /* NULL when none */
	const uint8_t *data;
	size_t len;
};
int ipc_dec_runner_reply(const msgpack_object *body, struct ipc_runner_reply *out);
#define IPC_SECRET_MAX 4096 /* a repository token over the API */
int ipc_dec_repo_seal(const msgpack_object *body, const uint8_t **token, size_t *len);
int ipc_dec_repo_sealed(const msgpack_object *body, const uint8_t **nonce, const uint8_t **ct,
                        size_t *ctlen);
int ipc_dec_artifact_open(const msgpack_object *body, char user[IPC_UUID_LEN + 1],
                          char art[IPC_UUID_LEN + 1]);
int ipc_dec_artifact_fd(const msgpack_object *body, uint64_t *size);
int ipc_dec_artifact_err(const msgpack_object *body, uint32_t *status);
#define IPC_PROVIDERS_MAX 8
#define IPC_MODELS_MAX 32
#define IPC_PROVIDER_NAME_MAX 32  /* [a-z0-9][a-z0-9_-]{0,31} */
#define IPC_MODEL_NAME_MAX 128    /* [A-Za-z0-9][A-Za-z0-9._:/@-]{0,127} */
#define IPC_URL_MAX 1023
#define IPC_PRICE_MAX 100000000000000ull /* 100,000,000 USD per million tokens */
enum { IPC_MODEL_OK = 0, IPC_MODEL_BUDGET = 1, IPC_MODEL_FAILED = 2, IPC_MODEL_REFUSED = 3,
       IPC_MODEL__MAX = 4 };
struct ipc_model {
	char name[IPC_MODEL_NAME_MAX + 1];
	uint64_t price[4]; /* input, output, cache_read, cache_write */
};
struct ipc_provider {
	char name[IPC_PROVIDER_NAME_MAX + 1];
	uint32_t kind, timeout_s, retries;
	int stream, max_completion;
	char base_url[IPC_URL_MAX + 1];
	const uint8_t *key; /* into the message */
	size_t keylen;
	struct ipc_model models[IPC_MODELS_MAX];
	size_t nmodels;
};
/* out holds IPC_PROVIDERS_MAX entries; *n is set to how many were sent. */
int ipc_dec_proxy_conf(const msgpack_object *body, struct ipc_provider *out, size_t *n);
int ipc_dec_proxy_channel(const msgpack_object *body, char run[IPC_UUID_LEN + 1]);
struct ipc_runner_proxy {
	char provider[IPC_PROVIDER_NAME_MAX + 1];
	char model[IPC_MODEL_NAME_MAX + 1];
	uint32_t max_tokens, tool_output_max;
	uint32_t mcp_tools_max, mcp_tool_bytes_max;
};
int ipc_dec_runner_proxy(const msgpack_object *body, struct ipc_runner_proxy *out);
#define IPC_MCP_NAME_MAX 64
#define IPC_MCP_TOOLS_MAX 1024                 /* mcp_tools_max */
#define IPC_MCP_TOOL_BYTES_MAX (16u * 1024 * 1024) /* mcp_tool_bytes_max */
enum { IPC_MCP_FD_CHANNEL = 0, IPC_MCP_FD_STDERR = 1 };
enum { IPC_MCP_STDIO = 1, IPC_MCP_HTTP = 2 };
struct ipc_mcp_start {
	char server[IPC_MCP_NAME_MAX + 1];
	char step[65];
};
int ipc_dec_mcp_start(const msgpack_object *body, struct ipc_mcp_start *out);
struct ipc_mcp_channel {
	uint32_t what, transport, startup_ms, call_ms;
};
int ipc_dec_mcp_channel(const msgpack_object *body, struct ipc_mcp_channel *out);
struct ipc_mcp_failed {
	const char *error; /* into the message, not NUL-terminated */
	size_t errlen;
	int absent;
};
int ipc_dec_mcp_failed(const msgpack_object *body, struct ipc_mcp_failed *out);
int ipc_dec_mcp_stop(const msgpack_object *body);
#define IPC_MCP_URL_MAX 2048
#define IPC_MCP_HEADERS_MAX 32
#define IPC_MCP_HEADER_MAX (128 + 2 + 4096 * 4) /* a name, ": ", a value with its
                                                 * credentials expanded */
#define IPC_MCP_SECRETS_MAX 64
struct ipc_proxy_mcp {
	char run[IPC_UUID_LEN + 1];
	char server[IPC_MCP_NAME_MAX + 1];
	char url[IPC_MCP_URL_MAX + 1];
	struct ipc_cur headers; /* each a bin */
	struct ipc_cur secrets; /* each a bin */
	uint32_t call_ms;
};
int ipc_dec_proxy_mcp(const msgpack_object *body, struct ipc_proxy_mcp *out);
struct ipc_model_call {
	char step[65];
	uint32_t attempt;
	char provider[IPC_PROVIDER_NAME_MAX + 1];
	char model[IPC_MODEL_NAME_MAX + 1];
	uint32_t max_tokens;
	uint64_t limit;
	const char *request; /* into the message, not NUL-terminated */
	size_t reqlen;
};
int ipc_dec_model_call(const msgpack_object *body, struct ipc_model_call *out);
struct ipc_model_reply {
	uint32_t code, stop;
	const char *error;
	size_t errlen;
	uint64_t cost, worst, usage[4];
	const char *content; /* into the message, not NUL-terminated */
	size_t contentlen;
};
int ipc_dec_model_reply(const msgpack_object *body, struct ipc_model_reply *out);
/* Whether s[0..len) is a provider name, a model name. */
int ipc_is_provider_name(const char *s, size_t len);
int ipc_is_model_name(const char *s, size_t len);
/* Whether s[0..len) is a canonical UUID (8-4-4-4-12 hex digits, lower case). */
int ipc_is_uuid(const char *s, size_t len);

/* IMSG_CHUNK; data points into the message.  See ipc_asm_feed(). */
struct ipc_chunk {
	uint64_t stream;
	uint32_t seq;
	int last;
	const uint8_t *data;
	size_t len;
};
int ipc_dec_chunk(const msgpack_object *body, struct ipc_chunk *out);

struct ipc_ctl_request {
	char cmd[IPC_CTL_CMD_MAX + 1];
	struct ipc_cur args; /* each a str */
	uint32_t nargs;
};
int ipc_dec_ctl_request(const msgpack_object *body, struct ipc_ctl_request *out);

struct ipc_ctl_reply {
	uint32_t code;
	const char *message;
	size_t msglen;
	const msgpack_object *data;
};
int ipc_dec_ctl_reply(const msgpack_object *body, struct ipc_ctl_reply *out);

int ipc_dec_ctl_sandbox(const msgpack_object *body, char *id, size_t idsz);

struct ipc_sbx_hello {
	uint32_t proto, verbose, access;
	uint64_t file_max, output_max, artifact_max;
	uint32_t timeout_max_ms;
	char id[IPC_SBX_ID_MAX + 1];
};
int ipc_dec_sbx_hello(const msgpack_object *body, struct ipc_sbx_hello *out);

/* Sandbox requests: strings copied NUL-terminated where they are names or
 * paths; data, old/new, argv point into the message. */
struct ipc_sbx_read {
	char path[IPC_SBX_PATH_MAX + 1];
	uint64_t offset, limit;
};
int ipc_dec_sbx_read(const msgpack_object *body, struct ipc_sbx_read *out);

struct ipc_sbx_write {
	char path[IPC_SBX_PATH_MAX + 1];
	const uint8_t *data;
	size_t len;
	int mkdirs;
};
int ipc_dec_sbx_write(const msgpack_object *body, struct ipc_sbx_write *out);

struct ipc_sbx_edit {
	char path[IPC_SBX_PATH_MAX + 1];
	const char *old, *new;
	size_t oldlen, newlen;
	uint32_t count;
};
int ipc_dec_sbx_edit(const msgpack_object *body, struct ipc_sbx_edit *out);

struct ipc_sbx_list {
	char path[IPC_SBX_PATH_MAX + 1];
	uint32_t max;
};
int ipc_dec_sbx_list(const msgpack_object *body, struct ipc_sbx_list *out);

struct ipc_sbx_glob {
	char pattern[IPC_SBX_PATTERN_MAX + 1];
	char base[IPC_SBX_PATH_MAX + 1];
	uint32_t max;
};
int ipc_dec_sbx_glob(const msgpack_object *body, struct ipc_sbx_glob *out);

struct ipc_sbx_grep {
	char regex[IPC_SBX_PATTERN_MAX + 1];
	char path[IPC_SBX_PATH_MAX + 1];
	char include[IPC_SBX_NAME_MAX + 1];
	int icase;
	uint32_t max;
};
int ipc_dec_sbx_grep(const msgpack_object *body, struct ipc_sbx_grep *out);

int ipc_dec_sbx_stat(const msgpack_object *body, char *path, size_t pathsz);

struct ipc_sbx_exec {
	int shell;
	struct ipc_cur argv; /* argc strings, none with a NUL byte */
	uint32_t argc;
	char cwd[IPC_SBX_PATH_MAX + 1];
	uint32_t timeout_ms;
};
int ipc_dec_sbx_exec(const msgpack_object *body, struct ipc_sbx_exec *out);

struct ipc_sbx_artifact {
	char key[IPC_SBX_NAME_MAX + 1];
	char kind[IPC_SBX_KIND_MAX + 1];
	char name[IPC_SBX_NAME_MAX + 1];
	uint64_t cap;
};
int ipc_dec_sbx_artifact(const msgpack_object *body, struct ipc_sbx_artifact *out);

struct ipc_sbx_output {
	uint32_t stream;
	const uint8_t *data;
	size_t len;
};
int ipc_dec_sbx_output(const msgpack_object *body, struct ipc_sbx_output *out);

struct ipc_sbx_exit {
	uint32_t code;
	const char *error;
	size_t errlen;
	int64_t status;
	uint32_t signal;
	int timed_out, truncated;
	uint64_t duration_ms, output_bytes;
};
int ipc_dec_sbx_exit(const msgpack_object *body, struct ipc_sbx_exit *out);

struct ipc_sbx_result {
	uint32_t code;
	const char *error;
	size_t errlen;
	const msgpack_object *data;
};
int ipc_dec_sbx_result(const msgpack_object *body, struct ipc_sbx_result *out);

/*
 * The egress process (DESIGN.md section 4.1):
 *  EGRESS_CONF   [cidrs array(<=IPC_EGRESS_CIDRS_MAX) of str(1..IPC_EGRESS_TEXT_MAX)
 *                (egress.allow_cidrs, as egress_cidr_parse reads them),
 *                tunnels_per_run u32 (1..1024), connect_timeout u32 (s, 1..300),
 *                idle_timeout u32 (s, 1..86400), bytes_per_run u64 (>= 1)]
 *                at READY and after a reload; applies to every run
 *  EGRESS_RUN    [run str (UUID), rules array(<=IPC_EGRESS_RULES_MAX) of
 *                str(1..IPC_EGRESS_TEXT_MAX) (canonical egress_rule_parse entries:
 *                the allow list of the step running, its presets resolved)]
 *                + the listening socket the run's sandbox made in its network
 *                namespace; again, with a copy, whenever a new egress is ready
 *  EGRESS_POLICY [run str, rules as above]  the run's next step: its list
 *                replaces the one in force (open tunnels stay)
 *  EGRESS_END    [run str]  the run's sandbox is gone: close its listener and
 *                every tunnel
 *  EGRESS_EVENT  [run str, kind u32 (IPC_EGRESS_EV_*), host str(<=253), port u32
 *                (<= 65535), address str(<=IPC_EGRESS_TEXT_MAX), reason
 *                str(<=IPC_EGRESS_TEXT_MAX), bytes_up u64, bytes_down u64, ms u64,
 *                suppressed u64, suppressed_denied u64 (<= suppressed)]  egress ->
 *                supervisor: one decision or one closed tunnel of a run it serves,
 *                for the run's events; UP and DOWN (a tunnel whose decision the
 *                rate limit left out) only count it.  A decision carries the
 *                decisions the rate limit left out since the last one sent, and
 *                how many of them were refusals; any other kind carries 0, 0
 *                (proto 16)
 *  EGRESS_STEP   [run str]  (a request: its id is echoed) the run's step ended:
 *                what did it move?  Sent after every event of the step, so the
 *                answer comes after them on the same channel
 *  EGRESS_TOTALS [run str, allowed u64, denied u64, bytes_up u64, bytes_down u64]
 *                egress -> supervisor, the answer to EGRESS_STEP (its id): the
 *                connections allowed and refused and the bytes relayed to the
 *                targets and to the sandbox since the step's EGRESS_POLICY (a
 *                tunnel that outlives its step counts in the step that moved
 *                the bytes; refusals the rate limit left out of the events count)
 *                (proto 14)
 */
#define IPC_EGRESS_CIDRS_MAX 64
#define IPC_EGRESS_RULES_MAX 2048
#define IPC_EGRESS_TEXT_MAX 264 /* a rule, a cidr, an address with its port, a reason */
enum {
	IPC_EGRESS_EV_ALLOWED = 0, /* network.allowed */
	IPC_EGRESS_EV_DENIED,      /* network.denied */
	IPC_EGRESS_EV_CLOSED,      /* network.closed */
	IPC_EGRESS_EV_UP,          /* a tunnel opened whose network.allowed the rate
	                              limit left out: counted, not stored */
	IPC_EGRESS_EV_DOWN,        /* ... and closed */
	IPC_EGRESS_EV__COUNT
};
struct ipc_egress_conf {
	struct ipc_cur cidrs; /* each a str */
	uint32_t tunnels, connect_timeout, idle_timeout;
	uint64_t bytes;
};
int ipc_dec_egress_conf(const msgpack_object *body, struct ipc_egress_conf *out);
/* EGRESS_RUN and EGRESS_POLICY */
struct ipc_egress_run {
	char run[IPC_UUID_LEN + 1];
	struct ipc_cur rules; /* each a str */
};
int ipc_dec_egress_run(const msgpack_object *body, struct ipc_egress_run *out);
int ipc_dec_egress_end(const msgpack_object *body, char run[IPC_UUID_LEN + 1]);
struct ipc_egress_event {
	char run[IPC_UUID_LEN + 1];
	uint32_t kind, port;
	char host[254];
	char address[IPC_EGRESS_TEXT_MAX + 1];
	char reason[IPC_EGRESS_TEXT_MAX + 1];
	uint64_t up, down, ms, suppressed, suppressed_denied;
};
int ipc_dec_egress_event(const msgpack_object *body, struct ipc_egress_event *out);
int ipc_dec_egress_step(const msgpack_object *body, char run[IPC_UUID_LEN + 1]);
struct ipc_egress_totals {
	char run[IPC_UUID_LEN + 1];
	uint64_t allowed, denied, up, down;
};
int ipc_dec_egress_totals(const msgpack_object *body, struct ipc_egress_totals *out);

#endif
