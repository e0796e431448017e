#!/usr/bin/env python3
"""A stateful fake of GitHub's and GitLab's REST APIs for pull requests, on
loopback over TLS (for tests/integration/test_forge.sh).

GitHub lives under /api/v3 (GitHub Enterprise's shape), GitLab under
/api/v4.  They speak the real wire protocol with the real error bodies
(/work/shared/notes/forges-and-ui.md, Part A):

  GitHub  GET  /repos/O/R
          GET  /repos/O/R/pulls?head=O:B&base=X&state=open  (an unqualified
               head is ignored, as GitHub ignores it)
          GET  /repos/O/R/pulls/N
          POST /repos/O/R/pulls   422 "A pull request already exists for
               O:B.", 422 "Draft pull requests are not supported in this
               repository." (knob), 422 "No commits between X and B" (knob),
               422 "body is too long (maximum is 65536 characters)"
          PATCH /repos/O/R/pulls/N
          403 "Request forbidden by administrative rules..." without a
          User-Agent; 401 "Bad credentials" unless Authorization is exactly
          "Bearer TOKEN"; 404 "Not Found" for an unknown repository.
  GitLab  POST /projects/ID/merge_requests (ID the URL-encoded path)
               409 ["Another open merge request already exists for this
               source branch: !N"]; 400 {"error": "title is missing"}
          GET  /projects/ID/merge_requests?source_branch=&target_branch=&state=
          GET  /projects/ID/merge_requests/IID
          PUT  /projects/ID/merge_requests/IID
          401 "401 Unauthorized"; 404 "404 Project Not Found".

Links (html_url, web_url) are https://HOST/... with the request's Host, or
the --web-host given (as github.com serves the pages of api.github.com).

Control (never logged):
  GET  /_state    every pull request, by repository
  POST /_control  a JSON object of knobs, applied at once:
       {"drafts_unsupported": bool}
       {"no_commits": [branch, ...]}
       {"faults": [{"status": 429, "count": K, "retry_after": "1",
                    "ratelimit_reset_in": N}, ...]}   the next K API
                    requests (count -1: all) get that status (a GitHub-like
                    or GitLab-like body), with Retry-After when given, and
                    x-ratelimit-remaining 0 and x-ratelimit-reset now+N when
                    ratelimit_reset_in is given
       {"malformed": {"count": K, "kind": "json"|"number"|"url"}}  the next
                    K successful answers are broken that way
       {"set_state": {"repo": "o/r", "number": N, "state": "closed"|"merged"}}
  POST /_reset    no pull request, no knob

Every API request is one JSON line in --log:
  {"t": unix time, "method", "path", "headers": {...all but Authorization},
   "auth": "ok"|"bad"|"missing", "token_elsewhere": bool, "status": N,
   "ratelimit_reset": unix second (only when x-ratelimit-reset was sent)}
token_elsewhere says whether the token was seen anywhere but the
Authorization header: the request line, another header, or the body.
The port is written to --ports once it listens; the token is read from
--token-file, never argv.
"""
import argparse
import hmac
import json
import os
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fakehttp  # noqa: E402  (beside this file)

GH_DOCS = "https://docs.github.com/rest/pulls/pulls"
UA_BODY = (b"Request forbidden by administrative rules. Please make sure your request has "
           b"a User-Agent header (https://docs.github.com/en/rest/overview/"
           b"resources-in-the-rest-api#user-agent-required). Check "
           b"https://developer.github.com for other possible causes.\n")


class State:
    def __init__(self, github_repos, gitlab_projects):
        self.lock = threading.Lock()
        self.github_repos = set(github_repos)
        self.gitlab_projects = set(gitlab_projects)
        self.reset()

    def reset(self):
        self.prs = {}            # ("github"|"gitlab", repo) -> [pr]
        self.drafts_unsupported = False
        self.no_commits = set()
        self.faults = []
        self.malformed = None

    def take_fault(self):
        while self.faults:
            f = self.faults[0]
            if f.get("count", 1) == 0:
                self.faults.pop(0)
                continue
            if f.get("count", 1) > 0:
                f["count"] = f.get("count", 1) - 1
            return dict(f)
        return None

    def take_malformed(self):
        m = self.malformed
        if not m or m.get("count", 1) == 0:
            return None
        if m.get("count", 1) > 0:
            m["count"] = m.get("count", 1) - 1
        return m.get("kind", "json")


def gh_pr(pr, host):
    merged = pr["state"] == "merged"
    owner = pr["repo"].split("/")[0]
    return {
        "url": f"https://{host}/api/v3/repos/{pr['repo']}/pulls/{pr['number']}",
        "id": 1000 + pr["number"],
        "number": pr["number"],
        "html_url": f"https://{host}/{pr['repo']}/pull/{pr['number']}",
        "state": "closed" if pr["state"] != "open" else "open",
        "title": pr["title"],
        "body": pr["body"],
        "draft": pr["draft"],
        "merged": merged,
        "merged_at": "2026-12-01T00:00:00Z" if merged else None,
        "head": {"label": f"{owner}:{pr['head']}", "ref": pr["head"], "sha": "0" * 40},
        "base": {"label": f"{owner}:{pr['base']}", "ref": pr["base"], "sha": "1" * 40},
        "user": {"login": "agrippa-bot"},
    }


def gl_mr(pr, host):
    return {
        "id": 2000 + pr["number"],
        "iid": pr["number"],
        "project_id": 42,
        "title": pr["title"],
        "description": pr["body"],
        "state": pr["state"],
        "source_branch": pr["head"],
        "target_branch": pr["base"],
        "draft": pr["draft"],
        "work_in_progress": pr["draft"],
        "web_url": f"https://{host}/{pr['repo']}/-/merge_requests/{pr['number']}",
    }


def gl_is_draft(title):
    t = title.lower()
    return t.startswith("draft:") or t.startswith("[draft]") or t.startswith("(draft)")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-forge/1"

    def log_message(self, fmt, *args):
        pass

    # ---- plumbing --------------------------------------------------------
    def _send(self, status, obj=None, raw=None, headers=()):
        body = raw if raw is not None else (json.dumps(obj).encode() if obj is not None else b"")
        self.send_response(status)
        ctype = "application/json; charset=utf-8" if raw is None else "text/plain"
        self.send_header("Content-Type", ctype)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.status_sent = status
        self.reset_sent = next((int(v) for k, v in headers if k == "x-ratelimit-reset"), None)

    def _log(self, raw_body):
        srv = self.server
        auth = self.headers.get("Authorization")
        want = "Bearer " + srv.token
        if auth is None:
            verdict = "missing"
        elif hmac.compare_digest(auth.encode(), want.encode()):
            verdict = "ok"
        else:
            verdict = "bad"
        elsewhere = srv.token.encode() in raw_body or srv.token in self.requestline
        hdrs = {}
        for k, v in self.headers.items():
            if k.lower() == "authorization":
                continue
            hdrs[k] = v
            if srv.token in k or srv.token in v:
                elsewhere = True
        return {"t": time.time(), "method": self.command, "path": self.path, "headers": hdrs,
                "auth": verdict, "token_elsewhere": elsewhere}

    def _write_log(self, entry):
        entry["status"] = getattr(self, "status_sent", 0)
        if getattr(self, "reset_sent", None) is not None:
            entry["ratelimit_reset"] = self.reset_sent
        with self.server.log_lock, open(self.server.log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")

    # ---- dispatch --------------------------------------------------------
    def _handle(self):
        raw = fakehttp.request_body(self)
        path, _, query = self.path.partition("?")
        if path.startswith("/_"):
            self._control(path, raw)
            return
        entry = self._log(raw)
        try:
            self._api(path, urllib.parse.parse_qs(query), raw, entry)
        finally:
            self._write_log(entry)

    def _control(self, path, raw):
        st = self.server.state
        with st.lock:
            if path == "/_state" and self.command == "GET":
                out = {f"{k[0]}:{k[1]}": v for k, v in st.prs.items()}
                self._send(200, out)
            elif path == "/_reset" and self.command == "POST":
                st.reset()
                self._send(204)
            elif path == "/_control" and self.command == "POST":
                knobs = json.loads(raw or b"{}")
                if "drafts_unsupported" in knobs:
                    st.drafts_unsupported = bool(knobs["drafts_unsupported"])
                if "no_commits" in knobs:
                    st.no_commits = set(knobs["no_commits"])
                if "faults" in knobs:
                    st.faults = list(knobs["faults"])
                if "malformed" in knobs:
                    st.malformed = dict(knobs["malformed"])
                if "set_state" in knobs:
                    s = knobs["set_state"]
                    for prs in st.prs.values():
                        for pr in prs:
                            if pr["repo"] == s["repo"] and pr["number"] == s["number"]:
                                pr["state"] = s["state"]
                self._send(204)
            else:
                self._send(404, {"message": "no such control"})

    def _api(self, path, q, raw, entry):
        st = self.server.state
        github = path.startswith("/api/v3/")
        gitlab = path.startswith("/api/v4/")
        with st.lock:
            fault = st.take_fault()
        if fault is not None:
            self._fault(fault, github)
            return
        if github and not self.headers.get("User-Agent"):
            self._send(403, raw=UA_BODY)
            return
        if entry["auth"] != "ok":
            if gitlab:
                self._send(401, {"message": "401 Unauthorized"})
            else:
                self._send(401, {"message": "Bad credentials",
                                 "documentation_url": "https://docs.github.com/rest",
                                 "status": "401"})
            return
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            self._send(400, {"message": "Problems parsing JSON"})
            return
        with st.lock:
            if github:
                self._github(path[len("/api/v3"):], q, body)
            elif gitlab:
                self._gitlab(path[len("/api/v4"):], q, body)
            else:
                self._send(404, {"message": "Not Found"})

    def _fault(self, fault, github):
        status = fault.get("status", 500)
        headers = []
        if "retry_after" in fault:
            headers.append(("Retry-After", str(fault["retry_after"])))
        if "ratelimit_reset_in" in fault:
            headers += [("x-ratelimit-limit", "5000"), ("x-ratelimit-remaining", "0"),
                        ("x-ratelimit-reset", str(int(time.time()) + fault["ratelimit_reset_in"]))]
        if status == 429 or (status == 403 and headers):
            msg = ("API rate limit exceeded for user ID 1." if github
                   else "Retry later")
        elif status >= 500:
            msg = "Server Error" if github else "500 Internal Server Error"
        else:
            msg = f"fault {status}"
        obj = {"message": msg, "documentation_url": "https://docs.github.com/rest"} if github \
            else {"message": msg}
        self._send(status, obj, headers=headers)

    def _answer(self, status, obj):
        """A successful answer, broken as the malformed knob says."""
        kind = self.server.state.take_malformed()
        if kind == "json":
            self._send(status, raw=json.dumps(obj).encode()[:-7])
            return
        if kind == "number":
            for o in obj if isinstance(obj, list) else [obj]:
                o["number" if "number" in o else "iid"] = -3
        elif kind == "url":
            for o in obj if isinstance(obj, list) else [obj]:
                k = "html_url" if "html_url" in o else "web_url"
                o[k] = "javascript:alert(1)"
        self._send(status, obj)

    # ---- GitHub ----------------------------------------------------------
    def _gh_validation(self, message, field=None, resource="PullRequest"):
        err = {"resource": resource, "code": "custom", "message": message}
        if field:
            err["field"] = field
        self._send(422, {"message": "Validation Failed", "errors": [err],
                         "documentation_url": GH_DOCS + "#create-a-pull-request",
                         "status": "422"})

    def _github(self, path, q, body):
        st = self.server.state
        host = self.server.web_host or self.headers.get("Host", "127.0.0.1")
        parts = path.strip("/").split("/")
        if len(parts) < 3 or parts[0] != "repos" or f"{parts[1]}/{parts[2]}" not in st.github_repos:
            self._send(404, {"message": "Not Found", "documentation_url": GH_DOCS, "status": "404"})
            return
        repo = f"{parts[1]}/{parts[2]}"
        owner = parts[1]
        prs = st.prs.setdefault(("github", repo), [])
        rest = parts[3:]
        if rest == [] and self.command == "GET":
            self._send(200, {"id": 1, "name": parts[2], "full_name": repo,
                             "default_branch": "main", "private": True})
        elif rest == ["pulls"] and self.command == "GET":
            out = [p for p in prs if q.get("state", ["open"])[0] in ("all", p["state"])]
            head = q.get("head", [None])[0]
            if head and ":" in head:  # an unqualified head is ignored, as on GitHub
                out = [p for p in out if f"{owner}:{p['head']}" == head]
            if q.get("base"):
                out = [p for p in out if p["base"] == q["base"][0]]
            self._answer(200, [gh_pr(p, host) for p in out])
        elif rest == ["pulls"] and self.command == "POST":
            self._github_create(repo, owner, prs, body, host)
        elif len(rest) == 2 and rest[0] == "pulls" and rest[1].isdigit():
            pr = next((p for p in prs if p["number"] == int(rest[1])), None)
            if pr is None:
                self._send(404, {"message": "Not Found", "documentation_url": GH_DOCS,
                                 "status": "404"})
            elif self.command == "GET":
                self._answer(200, gh_pr(pr, host))
            elif self.command == "PATCH":
                if len(body.get("body") or "") > 65536:
                    self._gh_validation("body is too long (maximum is 65536 characters)",
                                        "body", "Issue")
                    return
                for k in ("title", "body"):
                    if k in body:
                        pr[k] = body[k]
                self._answer(200, gh_pr(pr, host))
            else:
                self._send(404, {"message": "Not Found", "status": "404"})
        else:
            self._send(404, {"message": "Not Found", "documentation_url": GH_DOCS, "status": "404"})

    def _github_create(self, repo, owner, prs, body, host):
        st = self.server.state
        head = body.get("head") or ""
        if ":" in head:
            head = head.split(":", 1)[1]
        base = body.get("base") or ""
        if not body.get("title") or not head or not base:
            missing = "title" if not body.get("title") else "head" if not head else "base"
            self._send(422, {"message": "Validation Failed",
                             "errors": [{"resource": "PullRequest", "code": "missing_field",
                                         "field": missing}],
                             "documentation_url": GH_DOCS, "status": "422"})
            return
        if body.get("draft") and st.drafts_unsupported:
            self._send(422, {"message": "Draft pull requests are not supported in this repository.",
                             "documentation_url": GH_DOCS + "#create-a-pull-request",
                             "status": "422"})
            return
        if any(p["head"] == head and p["base"] == base and p["state"] == "open" for p in prs):
            self._gh_validation(f"A pull request already exists for {owner}:{head}.")
            return
        if head in st.no_commits:
            self._gh_validation(f"No commits between {base} and {head}")
            return
        if len(body.get("body") or "") > 65536:
            self._gh_validation("body is too long (maximum is 65536 characters)", "body", "Issue")
            return
        pr = {"repo": repo, "number": len(prs) + 1, "title": body["title"],
              "body": body.get("body") or "", "head": head, "base": base,
              "draft": bool(body.get("draft")), "state": "open"}
        prs.append(pr)
        self._answer(201, gh_pr(pr, host))

    # ---- GitLab ----------------------------------------------------------
    def _gitlab(self, path, q, body):
        st = self.server.state
        host = self.server.web_host or self.headers.get("Host", "127.0.0.1")
        parts = path.strip("/").split("/")
        if len(parts) < 2 or parts[0] != "projects":
            self._send(404, {"error": "404 Not Found"})
            return
        proj = urllib.parse.unquote(parts[1])
        if proj not in st.gitlab_projects:
            self._send(404, {"message": "404 Project Not Found"})
            return
        prs = st.prs.setdefault(("gitlab", proj), [])
        rest = parts[2:]
        if rest == ["merge_requests"] and self.command == "GET":
            out = [p for p in prs if q.get("state", ["all"])[0] in ("all", p["state"])]
            for key, field in (("source_branch", "head"), ("target_branch", "base")):
                if q.get(key):
                    out = [p for p in out if p[field] == q[key][0]]
            self._answer(200, [gl_mr(p, host) for p in out])
        elif rest == ["merge_requests"] and self.command == "POST":
            for k in ("source_branch", "target_branch", "title"):
                if not body.get(k):
                    self._send(400, {"error": f"{k} is missing"})
                    return
            head, base = body["source_branch"], body["target_branch"]
            old = next((p for p in prs if p["head"] == head and p["base"] == base
                        and p["state"] == "opened"), None)
            if old is not None:
                self._send(409, {"message": [
                    "Another open merge request already exists for this source branch: "
                    f"!{old['number']}"]})
                return
            if len(body.get("description") or "") > 1048576:
                self._send(400, {"message": {"description": [
                    "is too long (maximum is 1048576 characters)"]}})
                return
            pr = {"repo": proj, "number": len(prs) + 1, "title": body["title"],
                  "body": body.get("description") or "", "head": head, "base": base,
                  "draft": gl_is_draft(body["title"]), "state": "opened"}
            prs.append(pr)
            self._answer(201, gl_mr(pr, host))
        elif len(rest) == 2 and rest[0] == "merge_requests" and rest[1].isdigit():
            pr = next((p for p in prs if p["number"] == int(rest[1])), None)
            if pr is None:
                self._send(404, {"message": "404 Not found"})
            elif self.command == "GET":
                self._answer(200, gl_mr(pr, host))
            elif self.command == "PUT":
                if "title" in body:
                    pr["title"] = body["title"]
                    pr["draft"] = gl_is_draft(body["title"])
                if "description" in body:
                    pr["body"] = body["description"]
                self._answer(200, gl_mr(pr, host))
            else:
                self._send(405, {"message": "405 Method Not Allowed"})
        else:
            self._send(404, {"error": "404 Not Found"})

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, ctx, args, token):
        self.ctx = ctx
        self.token = token
        self.log_path = args.log
        self.web_host = args.web_host
        self.log_lock = threading.Lock()
        self.state = State(args.github_repo, args.gitlab_project)
        super().__init__(("127.0.0.1", 0), Handler)

    def finish_request(self, request, client_address):
        tls = fakehttp.tls_accept(self.ctx, request, 30)
        if tls is not None:
            super().finish_request(tls, client_address)

    def handle_error(self, request, client_address):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--ports", required=True)
    ap.add_argument("--github-repo", action="append", default=[])
    ap.add_argument("--gitlab-project", action="append", default=[])
    ap.add_argument("--web-host", default="")
    args = ap.parse_args()
    with open(args.token_file, encoding="utf-8") as f:
        token = f.read().strip()
    srv = Server(fakehttp.tls_server_context(args.cert, args.key), args, token)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    fakehttp.announce_and_wait(args.ports, f"{srv.server_address[1]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
