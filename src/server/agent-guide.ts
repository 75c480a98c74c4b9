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

## 2. Call an API through the broker

- If \`HTTPS_PROXY\` is set (as \`broker vault run\` does), call the real URL, e.g. \`https://api.github.com/user\`,
  with no Authorization header.
- Otherwise use the explicit proxy: \`{base_url}/proxy/<host>/<path>?<query>\` with your bearer token.

## 3. When you get 403 \`forbidden\`, or need a host or credential the vault lacks

On a proxied call, the host is not among the vault's services. The response carries a \`proposal_hint\`: edit its
\`proposal\` (services you need, credential slots a human must fill, a \`message\` and a \`user_message\`) and send
it (or write one in the same shape yourself, e.g. to change an existing service):

    POST {base_url}/v1/proposals

A service's \`auth\` is one of \`{"type": "bearer", "token": "KEY"}\`, \`{"type": "basic", "token": "KEY", "username": "u"}\`,
\`{"type": "header", "header": "X-Api-Key", "token": "KEY"}\`, \`{"type": "query", "param": "key", "token": "KEY"}\`,
\`{"type": "path", "template": "/bot{value}", "token": "KEY"}\` or \`{"type": "passthrough"}\`.
Never put credential values in a proposal. The 201 response holds an \`approval_url\`: give it to your human.
A 403 \`request_not_allowed\` means the method or path is outside the service's rules: its \`allowed\` lists them and
its \`proposal_hint\` proposes the same service with one more rule, for this request (widen the path to a pattern if
you will need more). A 400 on a service with rules means the path itself is ambiguous (\`..\`, \`//\`, \`%2F\`,
\`;\`, a backslash): send the plain path. Other errors: 403 \`service_disabled\` (tell the human; do not file a duplicate), 502 \`credential_not_found\`
(tell the human which key is missing), 403 \`egress_blocked\` (the address is not allowed), 429 (wait for
\`Retry-After\`).

## 4. Wait for the decision

Poll \`GET {base_url}/v1/proposals/<id>\` every 3 seconds for the first 30 seconds, then every 10 seconds, until
\`status\` is no longer \`pending\`. On \`applied\`, retry your original request. On \`rejected\` or \`expired\`, tell
your human and do not retry.
`;
