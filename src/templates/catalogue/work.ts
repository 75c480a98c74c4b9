// Work tracking and operations: Linear, Notion, Jira and Confluence (Atlassian Cloud), Asana, Sentry,
// Datadog, PagerDuty and Airtable. Deleting a whole project, space or service waits for a person.

import { allow, approveEach, DELETE, READ, WRITE, type Entry } from "./shape.ts";

const ATLASSIAN_DOCS_JIRA = "https://developer.atlassian.com/cloud/jira/platform/basic-auth-for-rest-apis/";
const ATLASSIAN_TOKENS = "https://id.atlassian.com/manage-profile/security/api-tokens";
const ATLASSIAN_FILL = { host: "your site, e.g. acme.atlassian.net", username: "your Atlassian account email" } as const;

export const WORK: readonly Entry[] = [
  {
    id: "linear",
    name: "Linear",
    hosts: ["api.linear.app"],
    auth: { type: "header", header: "authorization", token: "LINEAR_API_KEY" },
    docs: "https://linear.app/developers/graphql",
    obtain: "https://linear.app/settings/account/security",
    operations: {
      read: { summary: "little on its own: Linear's API is GraphQL, and its queries are POSTs (write)", rules: [allow(READ, ["/graphql"])] },
      write: { summary: "GraphQL queries and mutations (POST /graphql: they share the path)", rules: [allow(["POST"], ["/graphql"])] },
    },
  },
  {
    id: "notion",
    name: "Notion",
    hosts: ["api.notion.com"],
    auth: { type: "bearer", token: "NOTION_TOKEN" },
    docs: "https://developers.notion.com/reference/authentication",
    obtain: "https://www.notion.so/profile/integrations",
    operations: {
      read: {
        summary: "read and search pages, databases, blocks and users shared with the integration (the agent sends Notion-Version)",
        rules: [allow(READ, ["/v1/**"]), allow(["POST"], ["/v1/search", "/v1/databases/*/query", "/v1/data_sources/*/query"])],
      },
      write: {
        summary: "create and change pages, databases, blocks and comments (archiving a page is a PATCH)",
        rules: [allow(["POST", "PATCH"], ["/v1/**"])],
      },
      destructive: { summary: "delete blocks", rules: [allow(DELETE, ["/v1/**"])] },
    },
  },
  {
    id: "jira",
    name: "Jira Cloud",
    hosts: ["*.atlassian.net"],
    auth: { type: "basic", username: "you@example.com", token: "ATLASSIAN_API_TOKEN" },
    docs: ATLASSIAN_DOCS_JIRA,
    obtain: ATLASSIAN_TOKENS,
    fill: ATLASSIAN_FILL,
    operations: {
      read: {
        summary: "read and search issues, projects, boards and sprints (JQL search may be a POST)",
        rules: [allow(READ, ["/rest/api/3/**", "/rest/agile/1.0/**"]), allow(["POST"], ["/rest/api/3/search", "/rest/api/3/search/jql"])],
      },
      write: {
        summary: "create, edit, transition and comment on issues; change sprints and boards",
        rules: [allow(["POST", "PUT"], ["/rest/api/3/**", "/rest/agile/1.0/**"])],
      },
      destructive: {
        summary: "delete issues, comments and attachments; deleting a project waits for a person",
        rules: [allow(DELETE, ["/rest/api/3/**", "/rest/agile/1.0/**"]), approveEach(DELETE, ["/rest/api/3/project/*"])],
      },
    },
  },
  {
    id: "confluence",
    name: "Confluence Cloud",
    hosts: ["*.atlassian.net"],
    auth: { type: "basic", username: "you@example.com", token: "ATLASSIAN_API_TOKEN" },
    docs: "https://developer.atlassian.com/cloud/confluence/basic-auth-for-rest-apis/",
    obtain: ATLASSIAN_TOKENS,
    fill: ATLASSIAN_FILL,
    operations: {
      read: { summary: "read and search spaces, pages, blog posts and comments", rules: [allow(READ, ["/wiki/**"])] },
      write: { summary: "create and edit pages, blog posts, comments and labels", rules: [allow(["POST", "PUT"], ["/wiki/**"])] },
      destructive: {
        summary: "delete pages, comments and attachments; deleting a space waits for a person",
        rules: [allow(DELETE, ["/wiki/**"]), approveEach(DELETE, ["/wiki/api/v2/spaces/*", "/wiki/rest/api/space/*"])],
      },
    },
  },
  {
    id: "asana",
    name: "Asana",
    hosts: ["app.asana.com"],
    auth: { type: "bearer", token: "ASANA_TOKEN" },
    docs: "https://developers.asana.com/docs/personal-access-token",
    obtain: "https://app.asana.com/0/my-apps",
    operations: {
      read: { summary: "read workspaces, projects, tasks and comments", rules: [allow(READ, ["/api/1.0/**"])] },
      write: { summary: "create and change tasks, projects, sections and comments", rules: [allow(["POST", "PUT"], ["/api/1.0/**"])] },
      destructive: {
        summary: "delete tasks, sections and attachments; deleting a project waits for a person",
        rules: [allow(DELETE, ["/api/1.0/**"]), approveEach(DELETE, ["/api/1.0/projects/*"])],
      },
    },
  },
  {
    id: "sentry",
    name: "Sentry",
    hosts: ["sentry.io", "us.sentry.io", "de.sentry.io"],
    auth: { type: "bearer", token: "SENTRY_AUTH_TOKEN" },
    docs: "https://docs.sentry.io/api/auth/",
    obtain: "https://sentry.io/settings/account/api/auth-tokens/",
    operations: {
      read: { summary: "read organizations, projects, issues, events and releases", rules: [allow(READ, ["/api/0/**"])] },
      write: { summary: "resolve, assign and comment on issues; create releases and deploys", rules: [allow(WRITE, ["/api/0/**"])] },
      destructive: {
        summary: "delete issues, releases and debug files; deleting a project waits for a person",
        rules: [allow(DELETE, ["/api/0/**"]), approveEach(DELETE, ["/api/0/projects/*/*"])],
      },
    },
  },
  {
    id: "datadog",
    name: "Datadog",
    hosts: ["api.datadoghq.com", "api.us3.datadoghq.com", "api.us5.datadoghq.com", "api.datadoghq.eu", "api.ap1.datadoghq.com"],
    auth: { type: "header", header: "dd-api-key", token: "DD_API_KEY" },
    docs: "https://docs.datadoghq.com/api/latest/authentication/",
    obtain: "https://app.datadoghq.com/organization-settings/api-keys",
    operations: {
      read: {
        summary: "read endpoints need an application key too (DD-APPLICATION-KEY), which this template does not send",
        rules: [allow(READ, ["/api/**"])],
      },
      write: { summary: "submit metrics, events and logs (the API key alone is enough for these)", rules: [allow(WRITE, ["/api/**"])] },
      destructive: {
        summary: "delete monitors, dashboards and the like (needs an application key too); each dashboard or monitor deletion waits for a person",
        rules: [allow(DELETE, ["/api/**"]), approveEach(DELETE, ["/api/v1/dashboard/*", "/api/v1/monitor/*"])],
      },
    },
  },
  {
    id: "pagerduty",
    name: "PagerDuty",
    hosts: ["api.pagerduty.com"],
    auth: { type: "header", header: "authorization", prefix: "Token token=", token: "PAGERDUTY_API_TOKEN" },
    docs: "https://github.com/PagerDuty/developer-docs/blob/main/docs/REST-API/02-Authentication.md",
    obtain: "https://support.pagerduty.com/main/docs/api-access-keys",
    operations: {
      read: { summary: "read incidents, services, schedules, on-calls and users", rules: [allow(READ, ["/**"])] },
      write: { summary: "create, acknowledge, resolve and note incidents; change schedules and services", rules: [allow(WRITE, ["/**"])] },
      destructive: {
        summary: "delete overrides, notes and the like; deleting a service, escalation policy or schedule waits for a person",
        rules: [allow(DELETE, ["/**"]), approveEach(DELETE, ["/services/*", "/escalation_policies/*", "/schedules/*"])],
      },
    },
  },
  {
    id: "airtable",
    name: "Airtable",
    hosts: ["api.airtable.com"],
    auth: { type: "bearer", token: "AIRTABLE_TOKEN" },
    docs: "https://airtable.com/developers/web/guides/personal-access-tokens",
    obtain: "https://airtable.com/create/tokens",
    operations: {
      read: { summary: "read bases, tables and records", rules: [allow(READ, ["/v0/**"])] },
      write: { summary: "create and change records, tables and fields", rules: [allow(WRITE, ["/v0/**"])] },
      destructive: { summary: "delete records and comments", rules: [allow(DELETE, ["/v0/**"])] },
    },
  },
];
