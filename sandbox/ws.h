/*
 * ws — the sandbox's file tools over one workspace (DESIGN.md section 4).
 *
 * Every path a caller gives is relative to the workspace root and resolved
 * with openat2(..., RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) from the root
 * descriptor, so "..", absolute paths, sibling prefixes ("/workspace-evil"),
 * symlinks and /proc magic links cannot leave the workspace, whatever the
 * mount namespace shows.  A leading "/workspace/" (the name the sandbox's
 * processes see) is accepted and stripped; any other absolute path is
 * refused.  Nothing here follows a link out of the workspace, writes through
 * a hard link shared with another name, or writes anything but a regular file.
 *
 * Read-only workspaces (access: readOnly) accept writes only under
 * ".agrippa/artifacts/", resolved beneath that directory's own descriptor, so
 * a symlink in it cannot redirect a write elsewhere in the workspace.
 *
 * Errors: every function returns 0 or an errno value (positive) and writes a
 * one-line reason into err (size errsz; always NUL-terminated).  The reason
 * names the path as given, never a host path.  No function logs.
 *
 * None of this depends on IPC or on running inside a sandbox: the unit tests
 * run it over a temporary directory on the host.
 */
#ifndef AGRIPPA_SANDBOX_WS_H
#define AGRIPPA_SANDBOX_WS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define WS_PATH_MAX 4096
#define WS_ARTIFACT_DIR ".agrippa/artifacts"
#define WS_ARTIFACT_NAME_MAX 128

struct ws {
	int root;       /* O_PATH|O_DIRECTORY descriptor of the workspace root */
	int readonly;   /* access: readOnly */
	size_t file_max; /* largest file read whole (edit, grep) or written */
};

/*
 * Open dir as a workspace: root becomes an O_PATH|O_DIRECTORY descriptor
 * (the caller closes it with ws_close).  Returns 0 or an errno value.
 */
int ws_open(struct ws *ws, const char *dir, int readonly, size_t file_max, char *err,
    size_t errsz);
void ws_close(struct ws *ws);

/* A growable byte buffer; data is malloc'd, owned by the caller (ws_buf_free). */
struct ws_buf {
	uint8_t *data;
	size_t len, alloc;
};
void ws_buf_free(struct ws_buf *b);

/*
 * read: up to limit bytes of the regular file path starting at offset.
 * *size is the file's size; out receives the bytes (out->len may be 0 at or
 * past the end).  Refuses directories and special files.
 */
int ws_read(const struct ws *ws, const char *path, uint64_t offset, uint64_t limit,
    struct ws_buf *out, uint64_t *size, char *err, size_t errsz);

/*
 * write: replace path's contents with data[0..len) (len <= file_max).  An
 * existing path must be a regular file with exactly one link; a missing one
 * is created 0644; with mkdirs, missing parent directories are created 0755
 * (each beneath the root).  A final symlink is followed only while it stays
 * beneath the root.  Never truncates a file it then refuses.
 */
int ws_write(const struct ws *ws, const char *path, const void *data, size_t len, int mkdirs,
    char *err, size_t errsz);

/*
 * edit: replace old (non-empty) with new in path.  count 0: old must occur
 * exactly once; count n > 0: it must occur exactly n times and all are
 * replaced.  *replaced gets the number replaced.  Same file rules as write;
 * a result larger than file_max is refused and the file left unchanged.
 */
int ws_edit(const struct ws *ws, const char *path, const char *old, size_t oldlen,
    const char *new, size_t newlen, uint32_t count, uint32_t *replaced, char *err,
    size_t errsz);

enum ws_type { WS_T_FILE, WS_T_DIR, WS_T_SYMLINK, WS_T_OTHER };
const char *ws_type_name(enum ws_type t); /* "file", "dir", "symlink", "other" */

struct ws_entry {
	char *name;      /* list: the entry's name; glob: path relative to the root */
	enum ws_type type;
	uint64_t size;
};
/* A list of entries; everything malloc'd, freed by ws_entries_free. */
struct ws_entries {
	struct ws_entry *v;
	size_t n, alloc;
	int truncated; /* more existed than max */
};
void ws_entries_free(struct ws_entries *e);

/* list: the entries of directory path ("" or "." is the root), sorted by
 * name, "." and ".." left out, at most max of them. Symlinks are reported,
 * never followed. */
int ws_list(const struct ws *ws, const char *path, size_t max, struct ws_entries *out,
    char *err, size_t errsz);

/*
 * glob: paths (relative to the root, sorted) of files and directories under
 * base matching pattern, fnmatch(3) syntax per component plus "**" for any
 * number of directories ("**" + "/" + "*.c" matches a.c and x/y/a.c).  The
 * walk never follows symlinks (a symlink itself can match), skips ".git",
 * and stops after max matches (truncated set) or after visiting
 * WS_WALK_MAX entries.
 */
#define WS_WALK_MAX 200000
int ws_glob(const struct ws *ws, const char *pattern, const char *base, size_t max,
    struct ws_entries *out, char *err, size_t errsz);

struct ws_match {
	char *file;    /* relative to the root */
	uint32_t line; /* 1-based */
	char *text;    /* the line, without its newline, cut to WS_GREP_LINE_MAX bytes */
};
struct ws_matches {
	struct ws_match *v;
	size_t n, alloc;
	int truncated;
};
void ws_matches_free(struct ws_matches *m);
#define WS_GREP_LINE_MAX 512

/*
 * grep: lines matching the POSIX extended regex re under path (a file, or
 * a directory walked like glob), only files whose name matches include when
 * include is non-NULL and non-empty (fnmatch on the base name).  Binary
 * files (a NUL in the first 8 KiB), files over file_max and ".git" are
 * skipped.  At most max matches (truncated set).  A bad regex is EINVAL with
 * regerror's text.
 */
int ws_grep(const struct ws *ws, const char *re, const char *path, const char *include,
    int icase, size_t max, struct ws_matches *out, char *err, size_t errsz);

struct ws_stat {
	enum ws_type type;
	uint64_t size;
	uint32_t mode;  /* permission bits */
	int64_t mtime;  /* seconds */
	uint32_t nlink;
};
/* stat: like lstat(2) beneath the root (a final symlink is reported as one). */
int ws_stat(const struct ws *ws, const char *path, struct ws_stat *st, char *err,
    size_t errsz);

/*
 * A directory descriptor for a command's working directory: path resolved
 * beneath the root, which must be a directory.  *fd is O_PATH|O_DIRECTORY
 * (the caller closes it).
 */
int ws_open_dir(const struct ws *ws, const char *path, int *fd, char *err, size_t errsz);

/*
 * Artifact: name must be a single component ([A-Za-z0-9._-], 1 to
 * WS_ARTIFACT_NAME_MAX bytes, not "." or ".."); the file
 * ".agrippa/artifacts/<name>" is opened beneath the root with no symlink
 * anywhere on the way (RESOLVE_NO_SYMLINKS), and must be a regular file,
 * non-empty and at most cap bytes.  On success *fd is open for reading
 * (O_RDONLY, positioned at 0) and *size its size; the caller streams and
 * hashes it.  Errors: EINVAL bad name, ENOENT missing, ELOOP/EXDEV a symlink,
 * EFTYPE-like EINVAL for non-regular (the reason says which), ENODATA empty,
 * EFBIG over cap.
 */
int ws_artifact_open(const struct ws *ws, const char *name, uint64_t cap, int *fd,
    uint64_t *size, char *err, size_t errsz);

#endif
