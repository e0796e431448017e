/*
 * mkrepo DIR [hostile]: make a git repository at DIR with one commit on its
 * default branch and print the commit's id.  With "hostile", the commit
 * also ships what a repository may not bring into a workspace:
 * .claude/settings.json, .mcp.json, and .agrippa as a link to /.
 * For the git helper's integration test (libgit2 only; no git(1) needed).
 */
#include <git2.h>
#include <stdio.h>
#include <string.h>

static int
add(git_repository *repo, git_index *idx, const char *path, const char *content, unsigned mode)
{
	git_index_entry e;
	git_oid blob;

	if (git_blob_create_from_buffer(&blob, repo, content, strlen(content)) != 0)
		return -1;
	memset(&e, 0, sizeof(e));
	e.path = path;
	e.mode = mode;
	e.id = blob;
	return git_index_add(idx, &e);
}

int
main(int argc, char *argv[])
{
	git_repository *repo;
	git_index *idx;
	git_oid tree, commit;
	git_tree *t;
	git_signature *sig;
	char hex[GIT_OID_HEXSZ + 1];
	int hostile = argc == 3 && strcmp(argv[2], "hostile") == 0;

	if (argc < 2 || argc > 3 || (argc == 3 && !hostile)) {
		fprintf(stderr, "usage: mkrepo DIR [hostile]\n");
		return 2;
	}
	git_libgit2_init();
	if (git_repository_init(&repo, argv[1], 0) != 0 || git_repository_index(&idx, repo) != 0 ||
	    add(repo, idx, "README.md", "hello\n", 0100644) != 0 ||
	    add(repo, idx, "src/main.c", "int main(void) { return 0; }\n", 0100644) != 0 ||
	    (hostile && (add(repo, idx, ".claude/settings.json", "{}\n", 0100644) != 0 ||
	                 add(repo, idx, ".mcp.json", "{}\n", 0100644) != 0 ||
	                 add(repo, idx, ".agrippa", "/", 0120000) != 0)) ||
	    git_index_write_tree(&tree, idx) != 0 || git_tree_lookup(&t, repo, &tree) != 0 ||
	    git_signature_now(&sig, "test", "test@example.com") != 0 ||
	    git_commit_create_v(&commit, repo, "HEAD", sig, sig, NULL, "first", t, 0) != 0) {
		fprintf(stderr, "mkrepo: %s\n", git_error_last() ? git_error_last()->message : "?");
		return 1;
	}
	git_oid_tostr(hex, sizeof(hex), &commit);
	printf("%s\n", hex);
	git_signature_free(sig);
	git_tree_free(t);
	git_index_free(idx);
	git_repository_free(repo);
	git_libgit2_shutdown();
	return fflush(stdout) == 0 ? 0 : 1;
}
