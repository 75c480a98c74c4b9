// Infrastructure and platforms: Cloudflare, Vercel, Netlify, Supabase, Shopify Admin, AWS (S3, Lambda,
// Bedrock, signed with SigV4) and Google Maps Platform with an API key in the query. Hosts under a
// public suffix (myshopify.com, supabase.co, <region>.amazonaws.com) cannot be a wildcard here: the
// template names an example host the person replaces with theirs.

import type { ProposedAuth } from "../../store/index.ts";
import { allow, approveEach, DELETE, READ, WRITE, type Entry } from "./shape.ts";

/** AWS keys: region and service read from the host (s3.us-east-1.amazonaws.com) unless stated. */
const AWS_KEYS: ProposedAuth = { type: "aws_sigv4", access_key_id: "AWS_ACCESS_KEY_ID", secret_access_key: "AWS_SECRET_ACCESS_KEY" };
const AWS_SIGV4_DOCS = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv.html";
const AWS_OBTAIN = "https://console.aws.amazon.com/iam/home#/security_credentials";
const AWS_REGION_FILL = { host: "the endpoint in your region (us-east-1 shown)" } as const;

export const INFRA: readonly Entry[] = [
  {
    id: "cloudflare",
    name: "Cloudflare",
    hosts: ["api.cloudflare.com"],
    auth: { type: "bearer", token: "CLOUDFLARE_API_TOKEN" },
    docs: "https://developers.cloudflare.com/fundamentals/api/how-to/make-api-calls/",
    obtain: "https://dash.cloudflare.com/profile/api-tokens",
    operations: {
      read: { summary: "read zones, DNS records, Workers and account settings", rules: [allow(READ, ["/client/v4/**"])] },
      write: { summary: "create and change DNS records, Workers, pages and rules", rules: [allow(WRITE, ["/client/v4/**"])] },
      destructive: {
        summary: "delete DNS records, Workers and the like; deleting a zone waits for a person",
        rules: [allow(DELETE, ["/client/v4/**"]), approveEach(DELETE, ["/client/v4/zones/*"])],
      },
    },
  },
  {
    id: "vercel",
    name: "Vercel",
    hosts: ["api.vercel.com"],
    auth: { type: "bearer", token: "VERCEL_TOKEN" },
    docs: "https://vercel.com/docs/rest-api",
    obtain: "https://vercel.com/account/tokens",
    operations: {
      read: { summary: "read projects, deployments, domains and logs", rules: [allow(READ, ["/**"])] },
      write: { summary: "create deployments; change projects, domains and environment variables", rules: [allow(WRITE, ["/**"])] },
      destructive: {
        summary: "delete deployments, domains and environment variables; deleting a project waits for a person",
        rules: [allow(DELETE, ["/**"]), approveEach(DELETE, ["/*/projects/*"])],
      },
    },
  },
  {
    id: "netlify",
    name: "Netlify",
    hosts: ["api.netlify.com"],
    auth: { type: "bearer", token: "NETLIFY_AUTH_TOKEN" },
    docs: "https://docs.netlify.com/api/get-started/#authentication",
    obtain: "https://app.netlify.com/user/applications#personal-access-tokens",
    operations: {
      read: { summary: "read sites, deploys, forms and DNS", rules: [allow(READ, ["/api/v1/**"])] },
      write: { summary: "create deploys; change sites, forms, hooks and DNS", rules: [allow(WRITE, ["/api/v1/**"])] },
      destructive: {
        summary: "delete deploys, form submissions and DNS records; deleting a site waits for a person",
        rules: [allow(DELETE, ["/api/v1/**"]), approveEach(DELETE, ["/api/v1/sites/*"])],
      },
    },
  },
  {
    id: "supabase",
    name: "Supabase (secret key)",
    hosts: ["your-project.supabase.co"],
    auth: { type: "header", header: "apikey", token: "SUPABASE_SECRET_KEY" },
    docs: "https://supabase.com/docs/guides/api/api-keys",
    obtain: "https://supabase.com/dashboard/project/_/settings/api-keys",
    fill: { host: "your project's host, <project-ref>.supabase.co" },
    operations: {
      read: { summary: "read tables (REST, past row level security: a secret key) and storage", rules: [allow(READ, ["/rest/v1/**", "/storage/v1/**"])] },
      write: {
        summary: "insert, update and upsert rows; call RPC functions and Edge Functions; upload to storage",
        rules: [allow(WRITE, ["/rest/v1/**", "/storage/v1/**", "/functions/v1/**"])],
      },
      destructive: { summary: "delete rows and storage objects", rules: [allow(DELETE, ["/rest/v1/**", "/storage/v1/**"])] },
    },
  },
  {
    id: "shopify",
    name: "Shopify Admin API",
    hosts: ["your-store.myshopify.com"],
    auth: { type: "header", header: "x-shopify-access-token", token: "SHOPIFY_ACCESS_TOKEN" },
    docs: "https://shopify.dev/docs/api/admin/getting-started",
    obtain: "https://help.shopify.com/en/manual/apps/app-types/custom-apps",
    fill: { host: "your store's myshopify.com name, e.g. acme.myshopify.com" },
    operations: {
      read: { summary: "read products, orders, customers and inventory (REST)", rules: [allow(READ, ["/admin/api/**"])] },
      write: {
        summary:
          "create and change products, orders, customers and inventory; GraphQL (queries and mutations share POST …/graphql.json); each refund waits for a person",
        rules: [allow(["POST", "PUT"], ["/admin/api/**"]), approveEach(["POST"], ["/admin/api/*/orders/*/refunds.json", "/admin/api/*/orders/*/refunds/**"])],
      },
      destructive: {
        summary: "delete products, customers, webhooks and the like; each deletion waits for a person",
        rules: [allow(DELETE, ["/admin/api/**"]), approveEach(DELETE, ["/admin/api/**"])],
      },
    },
  },
  {
    id: "aws-s3",
    name: "Amazon S3",
    hosts: ["s3.us-east-1.amazonaws.com", "s3.amazonaws.com"],
    auth: AWS_KEYS,
    docs: "https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-authenticating-requests.html",
    obtain: AWS_OBTAIN,
    fill: AWS_REGION_FILL,
    operations: {
      read: { summary: "list buckets and objects; read objects (path-style: /bucket/key)", rules: [allow(READ, ["/**"])] },
      write: { summary: "put and copy objects; multipart uploads; bucket settings", rules: [allow(["PUT", "POST"], ["/**"])] },
      destructive: {
        summary: "delete objects; deleting a bucket waits for a person",
        rules: [allow(DELETE, ["/**"]), approveEach(DELETE, ["/*"])],
      },
    },
  },
  {
    id: "aws-lambda",
    name: "AWS Lambda",
    hosts: ["lambda.us-east-1.amazonaws.com"],
    auth: AWS_KEYS,
    docs: AWS_SIGV4_DOCS,
    obtain: AWS_OBTAIN,
    fill: AWS_REGION_FILL,
    operations: {
      read: { summary: "list and read functions, aliases and versions", rules: [allow(READ, ["/**"])] },
      write: {
        summary: "invoke functions; change configuration; each code update waits for a person",
        rules: [allow(["POST", "PUT"], ["/**"]), approveEach(["PUT"], ["/*/functions/*/code"])],
      },
      destructive: {
        summary: "delete aliases and versions; deleting a function waits for a person",
        rules: [allow(DELETE, ["/**"]), approveEach(DELETE, ["/*/functions/*"])],
      },
    },
  },
  {
    id: "aws-bedrock",
    name: "Amazon Bedrock (runtime)",
    hosts: ["bedrock-runtime.us-east-1.amazonaws.com"],
    auth: { ...AWS_KEYS, service: "bedrock" },
    docs: AWS_SIGV4_DOCS,
    obtain: AWS_OBTAIN,
    fill: AWS_REGION_FILL,
    operations: {
      read: { summary: "read asynchronous invocations", rules: [allow(READ, ["/async-invoke", "/async-invoke/**"])] },
      write: {
        summary: "invoke models (Converse, InvokeModel, streaming), count tokens, apply guardrails, start asynchronous invocations",
        rules: [allow(["POST"], ["/model/*/*", "/guardrail/*/version/*/apply", "/async-invoke"])],
      },
    },
  },
  {
    id: "google-maps",
    name: "Google Maps Platform",
    hosts: ["maps.googleapis.com", "routes.googleapis.com", "places.googleapis.com"],
    auth: { type: "query", param: "key", token: "GOOGLE_MAPS_API_KEY" },
    docs: "https://cloud.google.com/apis/docs/system-parameters",
    obtain: "https://console.cloud.google.com/google/maps-apis/credentials",
    operations: {
      read: {
        summary: "geocoding, directions, distance matrix, places, time zones, elevation and static maps (GET web services)",
        rules: [allow(READ, ["/maps/api/**", "/v1/places/**"])],
      },
      write: {
        summary: "the searches that are POSTs: Routes (computeRoutes, computeRouteMatrix) and Places (searchText, searchNearby); nothing is changed",
        rules: [allow(["POST"], ["/directions/v2:computeRoutes", "/distanceMatrix/v2:computeRouteMatrix", "/v1/places:searchText", "/v1/places:searchNearby"])],
      },
    },
  },
];
