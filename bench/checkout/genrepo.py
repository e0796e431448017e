#!/usr/bin/env python3
"""A generated repository of a real project's size for bench/checkout.

    genrepo.py [--seed N] [--commits N] [--files N] [--dirs N] [--scale F] OUT
    genrepo.py --gen-version

writes a new bare repository at OUT (which must not exist) through
`git fast-import`: one history from a fixed seed (the same seed, this file
and Python's random module give the same commit ids), then repacked the way
a server's repository is (`git repack -a -d -f`, deltas searched anew,
bitmaps written) and pruned.  It prints what it made, one "NAME VALUE" a
line.

The shape is a real C project's (a curl-sized one): a tree of a few hundred
directories (src/, lib/, include/, docs/, tests/data/, ...) that grows with
the history; files of a few KB, C sources and headers, documents, scripts
and test data; a first import of about a thousand files, then commits that
mostly touch 1 to 5 files (a hunk or three each: lines replaced by new
ones, so that every file keeps a few KB and every version is a delta of the
one before), now and then add a file, rarely delete or rename one.  What
the commits add is made of a large vocabulary, numbers and hex constants,
and a share of them change test data (hex and base64 lines), so that it
compresses the way real new text does and the pack reaches the size of a
real project's (--scale multiplies the amount of new text).  Branches:
feature branches fork from main, get commits of their own while main moves
on, and are merged back (a merge commit; a file both sides changed keeps
main's version); a few stay open; every ~2,500 commits on main an
annotated tag v1.N.0 and a branch release/1.N get cut, and the newest
release branches get backports and tags v1.N.M.  Dates run from 2004 on,
a few hours apart, by a pool of authors of unequal activity.
"""
import argparse
import os
import random
import subprocess
import sys
import time

GEN_VERSION = 1  # bump when the history this makes changes

ALPHA = "abcdefghijklmnopqrstuvwxyz"
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
TOP_DIRS = ["src", "lib", "include", "docs", "tests", "scripts", "packages", "projects",
            "m4", "winbuild", "plugins", "contrib"]
KIND_EXT = {"c": [".c"], "h": [".h"], "doc": [".md", ".txt", ".1"],
            "script": [".sh", ".py", ".pl"], "data": [""]}


class Gen:
    def __init__(self, seed, scale):
        self.r = random.Random(seed)
        self.scale = scale
        r = self.r
        syl = ["".join(r.choice(ALPHA) for _ in range(r.randint(2, 3))) for _ in range(400)]
        words = set()
        while len(words) < 6000:
            words.add("".join(r.choice(syl) for _ in range(r.randint(1, 3))))
        self.words = sorted(words)
        self.types = ["int", "size_t", "char *", "const char *", "unsigned int", "long",
                      "bool", "uint32_t", "uint64_t", "void *"] + \
            ["struct %s *" % w for w in self.words[:200]]
        authors = []
        for i in range(80):
            first, last = r.choice(self.words).capitalize(), r.choice(self.words).capitalize()
            authors.append(("%s %s" % (first, last), "%s.%s@example.org" % (first.lower(), last.lower()),
                            r.choice(["+0000", "+0100", "+0200", "-0500", "-0800", "+0530", "+0900"])))
        self.authors = authors
        # Zipf-like activity: a few authors write most commits
        self.author_w = [1.0 / (i + 1) ** 1.1 for i in range(len(authors))]

    # --- text ---------------------------------------------------------------------
    def w(self):
        return self.r.choice(self.words)

    def ident(self):
        n = self.r.random()
        if n < 0.5:
            return "%s_%s" % (self.w(), self.w())
        if n < 0.8:
            return self.w()
        return "%s_%s_%s" % (self.w(), self.w(), self.w())

    def sentence(self, lo=4, hi=14):
        return " ".join(self.w() for _ in range(self.r.randint(lo, hi))).capitalize() + "."

    def hexn(self):
        return "0x%08x" % self.r.getrandbits(32)

    def line(self, kind):
        r = self.r
        x = r.random()
        if kind in ("c", "h"):
            if x < 0.12:
                return " * %s\n" % self.sentence()
            if x < 0.20:
                return r.choice(["{\n", "}\n", "\n", "\treturn 0;\n", "\tbreak;\n", "}\n\n"])
            if x < 0.27:
                return "%s\n%s(%s %s, %s %s)\n" % (r.choice(self.types[:10]), self.ident(),
                                                  r.choice(self.types), self.w(),
                                                  r.choice(self.types), self.w())
            if x < 0.40:
                return "\tif (%s %s %s)\n" % (self.ident(), r.choice(["==", "!=", "<", ">=", "&"]),
                                               r.choice([self.hexn(), str(r.randint(0, 9999)), "NULL"]))
            if x < 0.52:
                return "\t{ %s, %s, %s, %s },\n" % (self.hexn(), self.hexn(), self.hexn(), self.hexn())
            if x < 0.64:
                return '\tlog_%s("%s %%d", %s);\n' % (r.choice(["info", "warn", "debug"]),
                                                      self.sentence(2, 6), self.ident())
            if x < 0.70 and kind == "h":
                return "#define %s %s\n" % (self.ident().upper(), self.hexn())
            return "\t%s = %s(%s, %s);\n" % (self.ident(), self.ident(), self.w(),
                                             r.choice([self.hexn(), str(r.randint(0, 65535)), self.w()]))
        if kind == "doc":
            if x < 0.1:
                return "\n## %s\n\n" % self.sentence(2, 5)
            return "%s %s\n" % (self.sentence(), self.sentence(3, 8))
        if kind == "script":
            if x < 0.3:
                return "# %s\n" % self.sentence()
            return '%s="%s %s"\n' % (self.w().upper(), self.w(), self.hexn())
        # test data: a protocol trace and its payload, hex and base64
        if x < 0.15:
            return "%s: %s %d\n" % (self.w().capitalize(), self.w(), r.randint(0, 99999))
        if x < 0.55:
            return " ".join("%02x" % b for b in r.randbytes(24)) + "\n"
        return "".join(r.choice(B64) for _ in range(64)) + "\n"

    def text(self, kind, nbytes):
        out, n = [], 0
        while n < nbytes:
            s = self.line(kind)
            out.append(s)
            n += len(s)
        return out

    # --- shape --------------------------------------------------------------------
    def tree(self, ndirs):
        r = self.r
        dirs = list(TOP_DIRS) + ["tests/data", "tests/unit", "docs/cmdline-opts", "lib/vtls",
                                 "lib/vauth", "include/curlx"]
        while len(dirs) < ndirs:
            parent = r.choice(dirs)
            if parent.count("/") >= 4:
                continue
            dirs.append("%s/%s" % (parent, self.w()))
        self.dirs = dirs
        # a few big directories, many small ones
        self.dir_w = [1.0 / (i + 1) ** 0.9 for i in range(len(dirs))]
        r.shuffle(self.dir_w)
        self.dir_w[dirs.index("tests/data")] = 25.0
        self.dir_w[dirs.index("lib")] = 12.0
        self.dir_w[dirs.index("src")] = 6.0
        self.dir_w[dirs.index("docs/cmdline-opts")] = 6.0

    def new_path(self, files):
        r = self.r
        while True:
            d = r.choices(self.dirs, self.dir_w)[0]
            top = d.split("/")[0]
            if d == "tests/data":
                kind = "data"
                name = "test%d" % r.randint(1, 9999)
            else:
                kind = {"docs": "doc", "scripts": "script", "m4": "script"}.get(top)
                if kind is None:
                    kind = r.choices(["c", "h", "doc", "script"], [60, 25, 8, 7])[0]
                name = self.ident() + r.choice(KIND_EXT[kind])
            p = "%s/%s" % (d, name)
            if p not in files:
                return p, kind

    def target_size(self, kind):
        if kind == "data":
            return int(min(20000, max(2000, self.r.lognormvariate(8.7, 0.5))))
        return int(min(12000, max(600, self.r.lognormvariate(8.1, 0.6))))


def kind_of(path):
    name = path.rsplit("/", 1)[-1]
    if path.startswith("tests/data/"):
        return "data"
    for k, exts in KIND_EXT.items():
        if any(e and name.endswith(e) for e in exts):
            return k
    return "c"


class Branch:
    def __init__(self, name, files, mark):
        self.name = name
        self.files = files      # path -> tuple of lines (a new tuple on every change)
        self.mark = mark
        self.changed = set()    # paths changed since the fork (feature branches)
        self.deleted = set()
        self.fork = None        # main's files at the fork
        self.left = 0           # commits still to make
        self.keep = False
        self.started = False    # fast-import has seen a commit of it
        self._paths = None

    def paths(self):
        """The paths in a stable order (the first ones are the files
        everyone edits), sorted again after a file came or went."""
        if self._paths is None:
            self._paths = sorted(self.files, key=hash_path)
        return self._paths

    def put(self, path, lines):
        if path not in self.files:
            self._paths = None
        self.files[path] = lines

    def remove(self, path):
        del self.files[path]
        self._paths = None


class History:
    def __init__(self, gen, out, ncommits):
        self.g = gen
        self.out = out
        self.ncommits = ncommits
        self.mark = 0
        self.count = 0
        self.when = 1072915200  # 2004-01-01
        self.sizes = {}
        self.drop = []          # merged feature branches: refs deleted at the end
        self.tags = 0

    def emit(self, s):
        self.out.write(s.encode())

    def data(self, s):
        b = s.encode()
        self.out.write(b"data %d\n" % len(b))
        self.out.write(b)
        self.out.write(b"\n")

    def commit(self, br, subject, mods, dels=(), merge=None):
        g, r = self.g, self.g.r
        self.mark += 1
        self.count += 1
        self.when += int(r.expovariate(1 / 15000.0)) + 60
        name, email, tz = r.choices(g.authors, g.author_w)[0]
        self.emit("commit refs/heads/%s\nmark :%d\n" % (br.name, self.mark))
        self.emit("author %s <%s> %d %s\n" % (name, email, self.when - r.randint(0, 86400), tz))
        self.emit("committer %s <%s> %d %s\n" % (name, email, self.when, tz))
        body = ""
        if r.random() < 0.7:
            body = "\n\n" + "\n".join(g.sentence(6, 12) for _ in range(r.randint(1, 5)))
        self.data(subject + body + "\n")
        if br.mark and not br.started:
            self.emit("from :%d\n" % br.mark)
        br.started = True
        if merge is not None:
            self.emit("merge :%d\n" % merge)
        for p in dels:
            self.emit("D %s\n" % p)
        for p in mods:
            content = "".join(br.files[p])
            self.emit("M %s inline %s\n" % ("100755" if p.endswith(".sh") else "100644", p))
            self.data(content)
        self.emit("\n")
        br.mark = self.mark

    def subject(self, path):
        g = self.g
        area = path.split("/")[-2] if "/" in path else "build"
        return "%s: %s %s %s" % (area, g.r.choice(["fix", "add", "remove", "make", "use", "avoid",
                                                    "check", "document", "simplify", "handle"]),
                                 g.w(), g.w())

    def edit(self, br, path, budget):
        """Replace a hunk or three of path with about budget bytes of new text."""
        g, r = self.g, self.g.r
        kind = kind_of(path)
        lines = list(br.files[path])
        size = sum(len(x) for x in lines)
        # files grow slowly over their lives, as real ones do (and as git's
        # delta search, which pairs versions of a path by size, expects)
        target = self.sizes.get(path, size) * 1.003 + 8
        self.sizes[path] = target = int(min(target, 48000))
        hunks = r.choices([1, 2, 3], [60, 30, 10])[0]
        for _ in range(hunks):
            new = g.text(kind, max(40, budget // hunks))
            nb = sum(len(x) for x in new)
            # remove about as much as comes in, more when the file is too big
            want = nb + (size - target) // hunks
            at = r.randrange(len(lines) + 1) if lines else 0
            end, removed = at, 0
            while end < len(lines) and removed < want:
                removed += len(lines[end])
                end += 1
            lines[at:end] = new
            size += nb - removed
        br.put(path, tuple(lines))
        br.changed.add(path)

    def budget(self):
        # new text per file touched: mostly a few hundred bytes, a long tail
        return int(self.g.r.lognormvariate(6.6, 0.9) * self.g.scale)

    def ordinary(self, br):
        g, r = self.g, self.g.r
        files = br.files
        mods, dels = [], []
        x = r.random()
        if x < 0.13:  # a new file
            p, kind = g.new_path(files)
            br.put(p, tuple(g.text(kind, g.target_size(kind))))
            br.changed.add(p)
            mods.append(p)
        elif x < 0.135 and len(files) > 100:  # a file goes
            p = r.choice(br.paths())
            br.remove(p)
            br.changed.discard(p)
            br.deleted.add(p)
            dels.append(p)
        elif x < 0.137 and len(files) > 100:  # a rename
            p = r.choice(br.paths())
            q, _ = g.new_path(files)
            if kind_of(q) == kind_of(p):
                br.put(q, files[p])
                br.remove(p)
                br.deleted.add(p)
                br.changed.discard(p)
                br.changed.add(q)
                dels.append(p)
                mods.append(q)
        n = r.choices([1, 2, 3, 4, 5, 8], [40, 25, 14, 9, 7, 5])[0]
        if mods and r.random() < 0.5:
            n = 0
        paths = br.paths()
        hot = r.random() < 0.5
        for _ in range(n):
            if hot:  # the files everyone edits
                p = paths[min(len(paths) - 1, int((r.paretovariate(1.0) - 1) * 30))]
            else:
                p = r.choice(paths)
            if p not in mods:
                self.edit(br, p, self.budget())
                mods.append(p)
        # a share of commits also change test data: the incompressible part
        if r.random() < 0.35:
            data = [p for p in paths[:400] if p.startswith("tests/data/")]
            if data:
                p = r.choice(data)
                if p not in mods:
                    self.edit(br, p, int(r.uniform(800, 4000) * g.scale))
                    mods.append(p)
        if not mods and not dels:
            return
        self.commit(br, self.subject((mods or dels)[0]), mods, dels)

    def fork(self, main, name, left, keep=False):
        b = Branch(name, dict(main.files), main.mark)
        b.fork = dict(main.files)
        b.left = left
        b.keep = keep
        return b

    def merge(self, main, b):
        mods, dels = [], []
        for p in sorted(b.changed):
            if main.files.get(p) is b.fork.get(p):  # main left it alone
                main.put(p, b.files[p])
                mods.append(p)
        for p in sorted(b.deleted):
            if p in main.files and main.files[p] is b.fork.get(p):
                main.remove(p)
                dels.append(p)
        self.commit(main, "Merge branch '%s'" % b.name, mods, dels, merge=b.mark)
        self.drop.append(b.name)

    def tag(self, name, br, msg):
        self.emit("tag %s\nfrom :%d\n" % (name, br.mark))
        self.emit("tagger Release Bot <release@example.org> %d +0000\n" % (self.when + 60))
        self.data(msg + "\n")
        self.tags += 1

    def run(self, initial_files):
        g, r = self.g, self.g.r
        main = Branch("main", {}, 0)
        for _ in range(initial_files):
            p, kind = g.new_path(main.files)
            main.put(p, tuple(g.text(kind, g.target_size(kind))))
        self.commit(main, "Initial import", sorted(main.files))
        features, releases = [], []
        minor, main_commits = 0, 0
        while self.count < self.ncommits:
            x = r.random()
            if features and x < 0.12:
                b = r.choice(features)
                self.ordinary(b)
                b.left -= 1
                if b.left <= 0:
                    features.remove(b)
                    if not b.keep:
                        self.merge(main, b)
                continue
            if releases and x < 0.13:
                b = r.choice(releases[-2:])
                self.ordinary(b)
                if r.random() < 0.08:
                    b.patch += 1
                    self.tag("v1.%d.%d" % (b.minor, b.patch), b, "Release 1.%d.%d" % (b.minor, b.patch))
                continue
            self.ordinary(main)
            main_commits += 1
            if r.random() < 1 / 180.0 and len(features) < 6:
                name = "feature/%s-%s" % (g.w(), g.w())
                features.append(self.fork(main, name, r.randint(4, 60), keep=r.random() < 0.12))
            if main_commits % 2500 == 0:
                minor += 1
                self.tag("v1.%d.0" % minor, main, "Release 1.%d.0\n\n%s" % (minor, g.sentence()))
                b = Branch("release/1.%d" % minor, dict(main.files), main.mark)
                b.minor, b.patch = minor, 0
                releases.append(b)
        # the feature branches still open stay as branches
        self.files = len(main.files)


def hash_path(p):
    h = 2166136261
    for c in p.encode():
        h = ((h ^ c) * 16777619) & 0xffffffff
    return h


def git(repo, *args, **kw):
    return subprocess.run(["git", "-C", repo] + list(args), check=True, **kw)


def main():
    if sys.argv[1:] == ["--gen-version"]:
        print(GEN_VERSION)
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--commits", type=int, default=31000)
    ap.add_argument("--files", type=int, default=1000, help="files of the first commit")
    ap.add_argument("--dirs", type=int, default=400)
    ap.add_argument("--scale", type=float, default=0.45)
    ap.add_argument("out")
    a = ap.parse_args()
    if os.path.exists(a.out):
        sys.exit("genrepo: %s exists" % a.out)
    t0 = time.time()
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", a.out], check=True, env=env)
    fi = subprocess.Popen(["git", "-C", a.out, "fast-import", "--quiet", "--depth=50"],
                          stdin=subprocess.PIPE, env=env)
    g = Gen(a.seed, a.scale)
    g.tree(a.dirs)
    h = History(g, fi.stdin, a.commits)
    h.run(a.files)
    fi.stdin.close()
    if fi.wait() != 0:
        sys.exit("genrepo: git fast-import failed")
    t1 = time.time()
    if h.drop:
        subprocess.run(["git", "-C", a.out, "update-ref", "--stdin"], check=True, env=env,
                       input="".join("delete refs/heads/%s\n" % b for b in h.drop).encode())
    git(a.out, "-c", "pack.threads=0", "repack", "-q", "-a", "-d", "-f", "-b",
        "--window=10", "--depth=50", env=env)
    git(a.out, "prune", "--expire=now", env=env)
    git(a.out, "gc", "-q", "--prune=now", env=env)
    t2 = time.time()
    print("gen_version %d" % GEN_VERSION)
    print("seed %d" % a.seed)
    print("import_s %.1f" % (t1 - t0))
    print("repack_s %.1f" % (t2 - t1))
    print("commits_made %d" % h.count)
    print("tags_made %d" % h.tags)


if __name__ == "__main__":
    main()
