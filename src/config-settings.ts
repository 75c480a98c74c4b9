// Every server setting with its default and meaning, in the order `broker server --help` and the README
// list them: the documentation of the BROKER_* variables and the OTEL_* ones the export reads (config.ts and
// config-otel.ts read them; this says what they are).

export interface SettingDoc {
  readonly name: string;
  readonly default: string;
  readonly description: string;
}

/** Every server setting, in the order `broker server --help` and the README list them. */
export const SETTINGS: readonly SettingDoc[] = [
  { name: "BROKER_DATA_DIR", default: "~/.broker", description: "Directory for the database and key material (created 0700)" },
  {
    name: "BROKER_DATABASE_URL",
    default: "(none: SQLite in BROKER_DATA_DIR)",
    description: "postgres://user:password@host:port/db to share one PostgreSQL among several instances (TLS via ?sslmode=require or verify-full)",
  },
  { name: "BROKER_DATABASE_POOL_SIZE", default: "10", description: "Most PostgreSQL connections one instance opens" },
  {
    name: "BROKER_DATABASE_OUTAGE_GRACE_SECONDS",
    default: "300",
    description: "While PostgreSQL is unreachable, sessions and credentials already cached keep serving proxied requests for this long (0: refuse at once)",
  },
  {
    name: "BROKER_DATABASE_STATEMENT_TIMEOUT_MS",
    default: "2000",
    description:
      "Longest wait for one PostgreSQL statement or transaction; past it the database counts as unreachable, as for a refused connection (a frozen server or a network partition answers nothing). Migrations are not bounded",
  },
  { name: "BROKER_HOST", default: "127.0.0.1", description: "Address both listeners bind to" },
  { name: "BROKER_PORT", default: "14321", description: "API port (REST API, /proxy, /discover, /approve)" },
  { name: "BROKER_PROXY_PORT", default: "14322", description: "Transparent proxy (CONNECT) port" },
  {
    name: "BROKER_WORKERS",
    default: "1",
    description: "Processes serving both ports together (SO_REUSEPORT), sharing state through the store; auto: one per core (same as --workers)",
  },
  { name: "BROKER_PUBLIC_URL", default: "http://<BROKER_HOST>:<BROKER_PORT>", description: "Base URL written into invite and approval links" },
  {
    name: "BROKER_ALLOWED_HOSTS",
    default: "(empty)",
    description:
      "Comma-separated extra host names the API answers to, beside the BROKER_PUBLIC_URL host, BROKER_HOST (any IP when 0.0.0.0 or ::) and localhost; other Host headers get 421",
  },
  {
    name: "BROKER_SECRET_STORE_TOKEN_FILES",
    default: "(empty)",
    description:
      "Comma-separated absolute paths of the platform token files (a Kubernetes service-account token, a CI's OIDC token) that the owner's secret store connections may sign in with (Vault JWT or Kubernetes auth); no other file is ever read for one",
  },
  {
    name: "BROKER_TRUSTED_PROXIES",
    default: "(empty)",
    description:
      "Comma-separated IPs or CIDRs of reverse proxies in front of the API; from them the client address (for the AUTH tier and the sign-in throttle) is the rightmost X-Forwarded-For entry that is not a trusted proxy",
  },
  { name: "BROKER_MASTER_PASSWORD", default: "(none: passwordless)", description: "Unlocks the data key; removed from the environment once read" },
  {
    name: "BROKER_MASTER_PASSWORD_FILE",
    default: "(none)",
    description: "Absolute path of a file holding the master password (one trailing newline dropped); instead of BROKER_MASTER_PASSWORD",
  },
  {
    name: "BROKER_ALLOW_PRIVATE_RANGES",
    default: "false",
    description: "Lift the default block on private, loopback and link-local ranges (metadata addresses stay blocked)",
  },
  { name: "BROKER_NETWORK_ALLOWLIST", default: "(empty)", description: "Comma-separated CIDRs or IPs exempted from the default block" },
  {
    name: "BROKER_RESOLVE",
    default: "(empty)",
    description:
      "Comma-separated host:port:address entries, as curl's --resolve (IPv6 in brackets: api.github.com:443:[::1]): connections to host:port go to the address instead of the DNS answer; TLS is still verified for the host name, and the network guard still checks the address (a private one needs BROKER_ALLOW_PRIVATE_RANGES or BROKER_NETWORK_ALLOWLIST; metadata addresses stay blocked)",
  },
  { name: "BROKER_UPSTREAM_CA_FILE", default: "(none)", description: "Extra PEM CA bundle trusted for upstreams, beside the system roots" },
  {
    name: "BROKER_OIDC_ISSUER",
    default: "(none: off)",
    description: "OpenID Connect issuer URL for sign-in with an identity provider (https; http only for localhost)",
  },
  { name: "BROKER_OIDC_CLIENT_ID", default: "(none)", description: "Client id registered at the identity provider (required with BROKER_OIDC_ISSUER)" },
  {
    name: "BROKER_OIDC_CLIENT_SECRET",
    default: "(none)",
    description: "Client secret at the identity provider (or BROKER_OIDC_CLIENT_SECRET_FILE; exactly one)",
  },
  { name: "BROKER_OIDC_CLIENT_SECRET_FILE", default: "(none)", description: "Absolute path of a file holding the client secret" },
  { name: "BROKER_OIDC_NAME", default: "your identity provider", description: 'Provider name on the "Sign in with ..." button' },
  { name: "BROKER_OIDC_SCOPES", default: "openid email profile", description: "Space-separated scopes asked of the provider (must include openid)" },
  {
    name: "BROKER_OIDC_CLIENT_AUTH_METHOD",
    default: "client_secret_basic",
    description: "How the broker authenticates to the provider's token endpoint, as the client is registered there: client_secret_basic or client_secret_post",
  },
  {
    name: "BROKER_CONNECT_<ID>_CLIENT_ID",
    default: "(none: off)",
    description:
      "Client id of the OAuth app registered at a template's provider, so people can connect an account from the console (<ID>: the template id upper-cased, '-' as '_', e.g. GITHUB); redirect URI to register: <BROKER_PUBLIC_URL>/connect/callback",
  },
  {
    name: "BROKER_CONNECT_<ID>_CLIENT_SECRET",
    default: "(none)",
    description: "That app's client secret (or BROKER_CONNECT_<ID>_CLIENT_SECRET_FILE, an absolute path; exactly one)",
  },
  { name: "BROKER_CONNECT_<ID>_CLIENT_SECRET_FILE", default: "(none)", description: "Absolute path of a file holding that app's client secret" },
  {
    name: "BROKER_CONNECT_<ID>_AUTHORIZE_URL",
    default: "(the template's)",
    description: "The provider's authorization endpoint, in place of the template's (GitHub Enterprise; https, http only for 127.0.0.1 or localhost)",
  },
  { name: "BROKER_CONNECT_<ID>_TOKEN_URL", default: "(the template's)", description: "The provider's token endpoint, in place of the template's (https)" },
  {
    name: "BROKER_CONNECT_<ID>_CLIENT_AUTH_METHOD",
    default: "client_secret_basic",
    description: "How the broker authenticates at that token endpoint, as the app is registered: client_secret_basic or client_secret_post",
  },
  { name: "BROKER_RATELIMIT_PROFILE", default: "default", description: "Rate-limit profile: default, strict, loose or off" },
  { name: "BROKER_RATELIMIT_LOCK", default: "false", description: "Pin rate limits to the environment; settings API becomes read-only" },
  { name: "BROKER_LOG_LEVEL", default: "info", description: "Log level: debug, info, warn or error" },
  { name: "BROKER_MAX_REQUEST_BYTES", default: "4294967296 (4 GiB)", description: "Largest proxied request body; larger ones get 413 (0: no cap)" },
  {
    name: "BROKER_MAX_RESPONSE_BYTES",
    default: "0 (no cap)",
    description: "Largest proxied response body; beyond it the stream is broken, never truncated silently",
  },
  {
    name: "BROKER_MAX_TUNNELS_PER_PRINCIPAL",
    default: "2000",
    description: "Open CONNECT tunnels one user or agent may hold at once (scoped sessions count against whoever minted them); beyond it a CONNECT gets 429",
  },
  {
    name: "BROKER_UPSTREAM_TIMEOUT_MS",
    default: "300000",
    description: "Connect and response-head timeout for upstreams; also the idle limit while a body streams",
  },
  {
    name: "BROKER_WORKLOAD_JWKS_COOLDOWN_MS",
    default: "30000",
    description: "After fetching a workload issuer's keys, how long before a token naming an unknown kid may fetch them again",
  },
  { name: "BROKER_AUDIT_RETENTION_DAYS", default: "30", description: "Audit records older than this are pruned" },
  { name: "BROKER_AUDIT_MAX_ROWS", default: "1000000", description: "Audit records beyond this count are pruned, oldest first" },
  {
    name: "BROKER_AUDIT_CHECKPOINT_RECORDS",
    default: "1000",
    description: "Sign a checkpoint of the audit hash chains once this many records were written since the last one (1 to 100000000)",
  },
  {
    name: "BROKER_AUDIT_CHECKPOINT_SECONDS",
    default: "300",
    description: "Sign a checkpoint at least this often (1 to 86400 seconds) while records are written; none while nothing is",
  },
  {
    name: "BROKER_SHUTDOWN_GRACE_S",
    default: "30",
    description: "On SIGTERM or SIGINT, seconds in-flight requests and open tunnels get to finish (a second signal exits at once)",
  },
  {
    name: "BROKER_LLM_PRICES_FILE",
    default: "(the shipped table)",
    description:
      'JSON price table for metered LLM calls (budgets, logs, metrics): {"currency": "USD", "written": "YYYY-MM-DD", "models": {"<model>": {"input": <per million tokens>, "output": <…>}}}; checked at start',
  },
  { name: "BROKER_METRICS", default: "false", description: "Serve Prometheus metrics at GET /metrics on the API port, without authentication" },
  {
    name: "BROKER_METRICS_TOKEN",
    default: "(none)",
    description: "Serve GET /metrics only with Authorization: Bearer <this token> (at least 16 characters; turns metrics on)",
  },
  {
    name: "BROKER_OTEL_EXPORTER_OTLP_ENDPOINT",
    default: "(none: off)",
    description:
      "Base URL of an OpenTelemetry collector's OTLP/HTTP receiver (http(s)://host:4318): a span per proxied request goes to <url>/v1/traces and every audit record to <url>/v1/logs; its TLS is verified against the system roots plus BROKER_UPSTREAM_CA_FILE. The standard OTEL_EXPORTER_OTLP_ENDPOINT does not turn it on",
  },
  {
    name: "OTEL_EXPORTER_OTLP_PROTOCOL",
    default: "http/protobuf",
    description: "With BROKER_OTEL_EXPORTER_OTLP_ENDPOINT: http/protobuf or http/json (gRPC is not supported)",
  },
  {
    name: "OTEL_EXPORTER_OTLP_HEADERS",
    default: "(none)",
    description:
      "With BROKER_OTEL_EXPORTER_OTLP_ENDPOINT: key=value pairs, comma-separated and percent-encoded, sent with every export (a collector's API key; never logged)",
  },
  {
    name: "OTEL_EXPORTER_OTLP_TIMEOUT",
    default: "10000",
    description: "With BROKER_OTEL_EXPORTER_OTLP_ENDPOINT: milliseconds one export may take, retries of an unreachable or busy collector included",
  },
  { name: "OTEL_EXPORTER_OTLP_COMPRESSION", default: "none", description: "With BROKER_OTEL_EXPORTER_OTLP_ENDPOINT: gzip or none" },
  {
    name: "OTEL_EXPORTER_OTLP_{TRACES,LOGS}_*",
    default: "(the general one)",
    description: "_PROTOCOL, _HEADERS, _TIMEOUT and _COMPRESSION for one signal only (its headers are added to the general ones)",
  },
  { name: "OTEL_SERVICE_NAME", default: "broker", description: "With BROKER_OTEL_EXPORTER_OTLP_ENDPOINT: the exported resource's service.name" },
  {
    name: "OTEL_RESOURCE_ATTRIBUTES",
    default: "(none)",
    description:
      "With BROKER_OTEL_EXPORTER_OTLP_ENDPOINT: key=value pairs, comma-separated and percent-encoded, added to the exported resource (deployment.environment.name=prod)",
  },
  { name: "OTEL_SDK_DISABLED", default: "false", description: "true turns the export off whatever BROKER_OTEL_EXPORTER_OTLP_ENDPOINT says" },
];
