// The short guide served to agents at GET /v1/skills/agent ({base_url} is filled in).

export const AGENT_GUIDE = `# Using the credential broker

You never hold credentials. The broker adds them to your requests. Refer to credentials by key name only;
never print, log or ask for their values.

Whatever your role, you cannot read a credential's value, set or delete a credential, or add, change, enable,
disable or remove a service: those calls (and \`broker credential set|get|delete\`, \`broker service add|remove\`…)
answer 403 \`forbidden\`. To get a new host or credential, file a proposal (step 3) and a human approves it.

Your token is in \`BROKER_SESSION_TOKEN\` (send it as \`Authorization: Bearer <token>\`). If you hold an agent
token (\`av_agt_…\`) instead of a session, also send \`X-Vault: <vault>\` on every call below.

## 1. Discover what you can reach

    GET {base_url}/discover

returns \`vault\`, \`proxy_url\`, \`services\` (hosts reachable through the broker) and \`available_credentials\`
(key names only). Hosts not listed are reached directly, not through the broker. A service with \`rules\` allows
only those methods and paths (\`allows\` says it in words; \`*\` is one path segment, \`**\` any number).
Each service's \`auth\` says how the broker adds the credential. For \`query\` it sets the \`param\` query parameter
(leave it out; any value you send is replaced). For \`path\` it puts the \`template\` (e.g. \`/bot{value}\`) before
your path: send \`/getMe\`, and the upstream gets \`/bot<value>/getMe\`.
For \`oauth2_client_credentials\`, \`oauth2_refresh\` and \`github_app\` the broker obtains a short-lived access
token itself and sends it as \`Authorization: Bearer <token>\`: send no Authorization header (yours is replaced).
For \`aws_sigv4\` the broker signs each request: configure your AWS SDK or CLI with placeholder keys (e.g.
\`AWS_ACCESS_KEY_ID=placeholder AWS_SECRET_ACCESS_KEY=placeholder\`) and the \`region\` shown, if any; the broker
drops that signature and signs with the vault's keys (\`vault run\` sets \`AWS_CA_BUNDLE\` for the AWS CLI and boto3;
the AWS SDK for JavaScript v3 ignores \`HTTPS_PROXY\` unless given a proxy-aware request handler). WebSocket upgrades to an \`aws_sigv4\` service are refused.

## 2. Call an API through the broker

- If \`HTTPS_PROXY\` is set (as \`broker vault run\` does), call the real URL, e.g. \`https://api.github.com/user\`,
  with no Authorization header.
- Otherwise use the explicit proxy: \`{base_url}/proxy/<host>/<path>?<query>\` with your bearer token.
- HTTP/2 and gRPC work through \`HTTPS_PROXY\` (\`vault run\` also sets \`grpc_proxy\` and the gRPC roots file). A
  broker refusal of a gRPC call arrives as a gRPC status (e.g. \`PERMISSION_DENIED\`) whose message is the JSON error
  below, \`proposal_hint\` included.
- A host that is not a service of the vault may still answer through \`HTTPS_PROXY\` (a blind tunnel: no credential,
  so usually a 401 from the API itself). \`broker vault run\` says so on stderr (\`broker: <host> is not a service of
  vault …\`); ask for access as in section 3.

## 3. When you get 403 \`forbidden\`, or need a host or credential the vault lacks

On a proxied call, the host is not among the vault's services. The response carries a \`proposal_hint\`: edit its
\`proposal\` (services you need, credential slots a human must fill, a \`message\` and a \`user_message\`) and send
it (or write one in the same shape yourself, e.g. to change an existing service):

    POST {base_url}/v1/proposals

A service's \`auth\` is one of \`{"type": "bearer", "token": "KEY"}\`, \`{"type": "basic", "token": "KEY", "username": "u"}\`,
\`{"type": "header", "header": "X-Api-Key", "token": "KEY"}\`, \`{"type": "query", "param": "key", "token": "KEY"}\`,
\`{"type": "path", "template": "/bot{value}", "token": "KEY"}\` or \`{"type": "passthrough"}\`; or one the broker
mints or signs from several keys:
\`{"type": "oauth2_client_credentials", "token_url": "https://…", "client_id": "KEY", "client_secret": "KEY", "scopes": ["a"], "audience": "…"}\`
(scopes and audience optional), \`{"type": "oauth2_refresh", "token_url": "https://…", "client_id": "KEY", "client_secret": "KEY", "refresh_token": "KEY"}\`
(both take \`"client_auth": "post"\` for providers that want the client in the body), \`{"type": "aws_sigv4",
"access_key_id": "KEY", "secret_access_key": "KEY", "session_token": "KEY", "region": "us-east-1", "service": "s3"}\`
(the last three optional; region and service default to what the host says) or \`{"type": "github_app",
"app_id": "123456", "installation_id": "45678901", "private_key": "KEY", "api_url": "https://…"}\` (api_url only for
GitHub Enterprise Server). Every KEY needs a credential slot (or an existing key): the human pastes the client
secret, refresh token, AWS keys or the app's .pem file there; say in each slot's description which one it is.
Never put credential values in a proposal. The 201 response holds an \`approval_url\`: give it to your human.
A 403 \`request_not_allowed\` means the method or path is outside the service's rules: its \`allowed\` lists them and
its \`proposal_hint\` proposes the same service with one more rule, for this request (widen the path to a pattern if
you will need more). A 400 on a service with rules means the path itself is ambiguous (\`..\`, \`//\`, \`%2F\`,
\`;\`, a backslash): send the plain path. Other errors: 403 \`service_disabled\` (tell the human; do not file a duplicate), 502 \`credential_not_found\`
(tell the human which key is missing), 502 \`credential_refresh_failed\` (the broker could not obtain or sign the credential:
retry later, or, when the message says so, tell the human to set the service's credentials again), 403 \`egress_blocked\` (the address is not allowed), 429 (wait for
\`Retry-After\`).

## 4. When you get 428 \`approval_required\`

A rule of the service asks a human to approve each such request (a refund, a deploy, a deletion): yours was held,
not sent. Give the \`approval_url\` to your human and tell them what the request does. Then send exactly the same
request again (same method, URL, body and headers): once approved, it goes through once. Or send it with
\`Prefer: wait=120\` and the broker holds it until a human decides (at most 120 seconds per try, and at most 4
such waits of yours at once; a retry finds the same approval). \`poll_url\` shows the approval's \`state\`
(\`pending\`, \`approved\`, \`denied\`, \`used\`, \`expired\`). A changed body or URL is a new request needing its own approval. 403 \`approval_denied\`: a human said
no; do not retry it. 403 \`approval_expired\`: nobody decided within 15 minutes; retry only if it is still wanted.
Never put a credential in the request to make it "work": the broker adds it.

## 5. Wait for the decision on a proposal

Poll \`GET {base_url}/v1/proposals/<id>\` every 3 seconds for the first 30 seconds, then every 10 seconds, until
\`status\` is no longer \`pending\`. On \`applied\`, retry your original request. On \`rejected\` or \`expired\`, tell
your human and do not retry.
`;
