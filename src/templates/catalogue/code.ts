// Code hosting: GitHub's REST and GraphQL API with a token or as a GitHub App installation, GitLab.com
// and Bitbucket Cloud. Merges and repository (project) deletion wait for a person.

import { allow, approveEach, DELETE, READ, WRITE, type Entry, type EntryOperation } from "./shape.ts";

const GITHUB_MERGES = [approveEach(["PUT"], ["/repos/*/*/pulls/*/merge"]), approveEach(["POST"], ["/repos/*/*/merges"])];
const GITHUB_REPO_DELETE = approveEach(DELETE, ["/repos/*/*"]);

/** GitHub's operations, the same with a token and as an app installation. */
const GITHUB_OPERATIONS: { read: EntryOperation; write: EntryOperation; destructive: EntryOperation } = {
  read: { summary: "read repositories, issues, pull requests and the rest of the REST API", rules: [allow(READ, ["/**"])] },
  write: {
    summary:
      "create and change issues, pull requests, comments, branches and files; GraphQL (POST /graphql: queries and mutations share the path); each merge waits for a person",
    rules: [allow(WRITE, ["/**"]), ...GITHUB_MERGES],
  },
  destructive: {
    summary: "delete branches, comments, releases and the like; deleting a repository waits for a person",
    rules: [allow(DELETE, ["/**"]), GITHUB_REPO_DELETE],
  },
};

export const CODE: readonly Entry[] = [
  {
    id: "github",
    name: "GitHub",
    hosts: ["api.github.com"],
    auth: { type: "bearer", token: "GITHUB_TOKEN" },
    docs: "https://docs.github.com/en/rest/authentication/authenticating-to-the-rest-api",
    obtain: "https://github.com/settings/personal-access-tokens/new",
    operations: GITHUB_OPERATIONS,
    // A GitHub App's user access tokens expire and come with a refresh token (an OAuth App's never do); the
    // app's permissions decide what the token may do, and GitHub ignores the scopes for it. An OAuth App
    // asked for them gets no refresh token, which the broker refuses.
    connect: {
      authorizeUrl: "https://github.com/login/oauth/authorize",
      tokenUrl: "https://github.com/login/oauth/access_token",
      scopes: { read: ["repo", "read:user"], write: ["repo", "read:user", "workflow"], destructive: ["repo", "read:user", "delete_repo"] },
      docs: "https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-user-access-token-for-a-github-app",
    },
  },
  {
    id: "github-app",
    name: "GitHub App",
    hosts: ["api.github.com"],
    auth: { type: "github_app", private_key: "GITHUB_APP_PRIVATE_KEY", app_id: "0", installation_id: "0" },
    docs: "https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/authenticating-as-a-github-app-installation",
    obtain: "https://github.com/settings/apps/new",
    fill: {
      app_id: "the app's ID (or client ID), on the app's settings page",
      installation_id: "the installation's numeric ID (the number ending the installation's settings URL)",
    },
    operations: GITHUB_OPERATIONS,
  },
  {
    id: "gitlab",
    name: "GitLab",
    hosts: ["gitlab.com"],
    auth: { type: "header", header: "private-token", token: "GITLAB_TOKEN" },
    docs: "https://docs.gitlab.com/api/rest/authentication/",
    obtain: "https://gitlab.com/-/user_settings/personal_access_tokens",
    operations: {
      read: { summary: "read projects, issues, merge requests and pipelines (REST API v4)", rules: [allow(READ, ["/api/v4/**"])] },
      write: {
        summary: "create and change issues, merge requests, branches and files; GraphQL (POST /api/graphql); each merge waits for a person",
        rules: [allow(WRITE, ["/api/v4/**", "/api/graphql"]), approveEach(["PUT"], ["/api/v4/projects/*/merge_requests/*/merge"])],
      },
      destructive: {
        summary: "delete branches, issues, pipelines and the like; deleting a project or group waits for a person",
        rules: [allow(DELETE, ["/api/v4/**"]), approveEach(DELETE, ["/api/v4/projects/*", "/api/v4/groups/*"])],
      },
    },
  },
  {
    id: "bitbucket",
    name: "Bitbucket Cloud",
    hosts: ["api.bitbucket.org"],
    auth: { type: "basic", username: "you@example.com", token: "BITBUCKET_API_TOKEN" },
    docs: "https://support.atlassian.com/bitbucket-cloud/docs/using-api-tokens/",
    obtain: "https://id.atlassian.com/manage-profile/security/api-tokens",
    fill: { username: "your Atlassian account email" },
    operations: {
      read: { summary: "read repositories, pull requests, issues and pipelines", rules: [allow(READ, ["/2.0/**"])] },
      write: {
        summary: "create and change pull requests, comments, branches and pipelines; each merge waits for a person",
        rules: [allow(WRITE, ["/2.0/**"]), approveEach(["POST"], ["/2.0/repositories/*/*/pullrequests/*/merge"])],
      },
      destructive: {
        summary: "delete branches, comments and the like; deleting a repository waits for a person",
        rules: [allow(DELETE, ["/2.0/**"]), approveEach(DELETE, ["/2.0/repositories/*/*"])],
      },
    },
  },
];
