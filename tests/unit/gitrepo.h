/*
 * What the git helper's unit tests share: a repository made from a list of
 * files, committed on HEAD; a shell command run.  Included by
 * test_checkout.c, test_diff.c and test_push.c (after cmocka.h, git2.h,
 * stdarg.h, stdio.h and stdlib.h).
 */
#ifndef AGRIPPA_TEST_GITREPO_H
#define AGRIPPA_TEST_GITREPO_H

/* One file of the commit: content of len bytes (0: strlen), mode. */
struct file {
	const char *path;
	const char *content;
	unsigned mode;
	size_t len;
};

/*
 * A commit on HEAD of a new repository at path whose tree is exactly files,
 * built through the index so that nested paths get their trees.  Its id in
 * hex goes to hex (GH_OID_HEX_MAX + 1 bytes).
 */
static void
make_repo(const char *path, const struct file *files, size_t n, char *hex)
{
	git_repository *repo;
	git_index *idx;
	git_index_entry e;
	git_oid blob, tree, commit;
	git_tree *t;
	git_signature *sig;
	size_t i, len;

	assert_int_equal(git_repository_init(&repo, path, 0), 0);
	assert_int_equal(git_repository_index(&idx, repo), 0);
	for (i = 0; i < n; i++) {
		len = files[i].len != 0 ? files[i].len : strlen(files[i].content);
		assert_int_equal(git_blob_create_from_buffer(&blob, repo, files[i].content, len),
		                 0);
		memset(&e, 0, sizeof(e));
		e.path = files[i].path;
		e.mode = files[i].mode;
		e.id = blob;
		assert_int_equal(git_index_add(idx, &e), 0);
	}
	assert_int_equal(git_index_write_tree(&tree, idx), 0);
	assert_int_equal(git_tree_lookup(&t, repo, &tree), 0);
	assert_int_equal(git_signature_now(&sig, "test", "test@example.com"), 0);
	assert_int_equal(git_commit_create_v(&commit, repo, "HEAD", sig, sig, NULL, "c", t, 0), 0);
	git_oid_tostr(hex, GH_OID_HEX_MAX + 1, &commit);
	git_signature_free(sig);
	git_tree_free(t);
	git_index_free(idx);
	git_repository_free(repo);
}

/* Run a shell command (git, as the test's own tool); its status. */
static inline int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int
sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

#endif
