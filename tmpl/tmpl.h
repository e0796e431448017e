/*
 * tmpl — the template compiler (DESIGN.md section 5).
 *
 * A template is one YAML document describing a job as phases of steps.  The
 * compiler checks it completely and turns it into a canonical JSON document
 * (jansson) with every default filled in, which is what is stored, pinned on
 * runs and read by the engine: nothing downstream parses YAML.
 *
 * Errors: every problem of the file is reported, one per line, as
 * "NAME:LINE:COL: what was expected" (1-based, at the offending key or
 * value), not only the first; after a YAML syntax error parsing stops with
 * that error.  Whole-document problems without a position (too large) are
 * "NAME: reason".  The compiler never echoes a value it refused beyond a
 * short, printable excerpt.
 *
 * The compiled form (keys in this order; all present):
 *   { "name": str, "version": int, "description": str (or ""),
 *     "params": { NAME: { "type": "string"|"int"|"bool"|"repoRef",
 *                          "required": bool, "default": value|null,
 *                          "description": str } },
 *     "workspace": { "repo": str (may hold ${params.x}),
 *                    "ref": str (may hold ${params.x} of string parameters) or null,
 *                    "access": "readWrite"|"readOnly" },
 *     "budget": { "usd_micros": int } or null,
 *     "network": NETWORK or null,
 *     "phases": [ { "name": str, "budget": { "usd_micros": int } or null,
 *                   "steps": [ STEP ] } ] }
 *   STEP: { "id": str, "kind": "command"|"agent"|"patch"|"checkpoint"|"pull_request",
 *           "retry": int, "timeout_s": int, "allow_failure": bool,
 *           "when": "success"|"failure"|"always"|"${params.NAME}",
 *           "requires": { "skills": [ { "name": str, "optional": bool } ],
 *                         "mcp_servers": [ { "name": str, "optional": bool } ] },
 *           "produces": [ { "key": str, "kind": "text"|"md"|"json"|"patch",
 *                           "required": bool, "file": str } ],
 *           and per kind: command { "network": NETWORK or null, "run": str };
 *           agent { "network": NETWORK or null, "prompt": str,
 *           "max_turns": int }; checkpoint { "message": str, "expires_s": int };
 *           pull_request { "title": str, "body": str, "branch": str, "base": str,
 *           "draft": bool } ("" for the defaults); patch {} }
 *   NETWORK: { "allow": [ str ], "presets": [ str ] }
 *
 * network: what a run's sandbox may reach through the egress process
 * (agrippa-template(5)).  null is no network; a step's NETWORK, when not
 * null, replaces the template's for that step (an empty one is none).
 * "allow" holds egress_rule_parse entries in their canonical text
 * (egress/policy.h); an entry holding ${...} is refused, since parameters
 * never widen the network.  "presets" holds names of the configuration's
 * egress.presets, checked here only for their form: whether a preset
 * exists is decided when a run starts, against the configuration then in
 * force, because templates outlive reloads and are compiled where no
 * configuration is (agrippactl template check, httpd); a run naming a
 * preset the configuration lacks fails at start with that name.
 */
#ifndef AGRIPPA_TMPL_H
#define AGRIPPA_TMPL_H

#include <stddef.h>

#include <jansson.h>

#define TMPL_MAX_SIZE (256 * 1024) /* larger template files are refused */
#define TMPL_NAME_MAX 64
#define TMPL_REF_MAX 255 /* bytes of a workspace.ref */

/*
 * Compile buf[0..len) (need not be NUL-terminated; name is used in
 * messages).  On success returns 0 and sets *out to the compiled document
 * (the caller json_decref()s it).  On failure returns -1, *out is NULL, and
 * errbuf (size errsz, always NUL-terminated) holds every error, one
 * "NAME:LINE:COL: message\n" per line; once a line does not fit, it and
 * every later one are dropped whole (the call still fails).  *nerr, when
 * not NULL, gets the number of errors found.
 */
int tmpl_compile(const char *name, const unsigned char *buf, size_t len, json_t **out,
    char *errbuf, size_t errsz, unsigned *nerr);

/* The same for a file: "path: strerror" when it cannot be read, "path:
 * not a regular file", "path: larger than TMPL_MAX_SIZE bytes". */
int tmpl_compile_file(const char *path, json_t **out, char *errbuf, size_t errsz,
    unsigned *nerr);

/*
 * Whether s[0..len) (need not be NUL-terminated) may name the revision a
 * run checks out (workspace.ref): a full commit id (exactly 40 or 64
 * lower-case hex digits), or a git ref name, optionally prefixed
 * refs/heads/ or refs/tags/, that breaks none of these rules, judged in
 * this order: not empty; at most TMPL_REF_MAX bytes; no control character
 * or DEL; no space; none of ~ ^ : ? * [ \; not starting with '-', after
 * the prefix neither; not starting with '/'; not ending with '/' or '.';
 * no "//" (an empty component); no ".."; no "@{"; not "@", after the
 * prefix neither; no component starting with '.'; no component ending
 * with ".lock".  That is git check-ref-format's set plus "no leading '-'",
 * so that a ref is never taken for an option of a git command.  Returns
 * NULL when it may, else the reason of the first rule broken, a static
 * string ("must not contain '..'"); ref_problem in
 * sql/migrations/0009_ref.sql answers the same.
 */
const char *tmpl_ref_problem(const char *s, size_t len);

/*
 * Whether s[0..len) may name a branch a pull request pushes to or is for:
 * a ref by tmpl_ref_problem's rules that is a branch's short name (no
 * refs/ prefix, not a commit id, not HEAD).  NULL, or why not (after
 * "not a branch name: " in messages).  The SQL's pr_branch_ok is the same
 * rule.
 */
const char *tmpl_branch_problem(const char *s, size_t len);

#endif
