/** @jsxImportSource hono/jsx */
// The root CA block of `/settings`: download link (GET /v1/ca.pem), fingerprint, expiry, how each
// kind of client trusts it, and rotation behind a typed confirmation (owner only, as POST
// /v1/ca/rotate). Shows only the public certificate; the CA key never leaves the vault.

import type { RootCa } from "../../crypto/index.ts";
import { ConfirmForm, Name, Section, Time } from "../ui/index.ts";

export const ROTATE_PHRASE = "rotate";

/** SHA-256 of the certificate's DER, as `AB:CD:…` (what `openssl x509 -fingerprint -sha256` prints). */
export async function fingerprintOf(ca: RootCa): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", ca.cert.rawData));
  return [...digest].map((b) => b.toString(16).padStart(2, "0").toUpperCase()).join(":");
}

function Snippet(props: { id: string; children: string }) {
  return (
    <pre class="note" id={props.id}>
      <code>{props.children}</code>
    </pre>
  );
}

/** Per-client trust steps; `vault run` sets all of these variables itself, so they matter for other set-ups. */
function TrustInstructions(props: { pemUrl: string }) {
  const file = "broker-ca.pem";
  return (
    <>
      <h3>Trust it in each client</h3>
      <p>
        <code>broker vault run</code> does all of this for the command it starts. For anything else, download the certificate once, then:
      </p>
      <Snippet id="trust-download">{`curl -fsS -o ${file} ${props.pemUrl}`}</Snippet>
      <dl class="overview trust">
        <dt>curl</dt>
        <dd>
          <Snippet id="trust-curl">{`curl --cacert ${file} https://api.example.com/`}</Snippet>
        </dd>
        <dt>Python (requests, httpx)</dt>
        <dd>
          <Snippet id="trust-python">{`export REQUESTS_CA_BUNDLE=$PWD/${file} SSL_CERT_FILE=$PWD/${file}`}</Snippet>
        </dd>
        <dt>Node.js</dt>
        <dd>
          <Snippet id="trust-node">{`export NODE_EXTRA_CA_CERTS=$PWD/${file} NODE_USE_ENV_PROXY=1`}</Snippet>
        </dd>
        <dt>git</dt>
        <dd>
          <Snippet id="trust-git">{`git config --global http.sslCAInfo $PWD/${file}`}</Snippet>
        </dd>
        <dt>Debian, Ubuntu</dt>
        <dd>
          <Snippet id="trust-debian">{`sudo cp ${file} /usr/local/share/ca-certificates/broker-ca.crt\nsudo update-ca-certificates`}</Snippet>
        </dd>
        <dt>macOS</dt>
        <dd>
          <Snippet id="trust-macos">{`sudo security add-trusted-cert -d -r trustRoot \\\n  -k /Library/Keychains/System.keychain ${file}`}</Snippet>
        </dd>
      </dl>
    </>
  );
}

export function CaSection(props: { ca: RootCa | undefined; fingerprint: string | undefined; publicUrl: string }) {
  const { ca } = props;
  if (!ca) {
    return (
      <Section title="Root certificate" id="ca">
        <p class="muted">This server runs without the transparent proxy's certificate authority.</p>
      </Section>
    );
  }
  const pemUrl = `${props.publicUrl.replace(/\/$/, "")}/v1/ca.pem`;
  return (
    <>
      <Section
        title="Root certificate"
        id="ca"
        description="Agents using HTTPS_PROXY talk to the broker, which shows them certificates signed by this root. Their HTTP clients must trust it; it is public, and its key never leaves the broker."
      >
        <dl class="overview" id="ca-facts">
          <dt>Subject</dt>
          <dd>
            <Name>{ca.cert.subject}</Name>
          </dd>
          <dt>SHA-256 fingerprint</dt>
          <dd>
            <Name>{props.fingerprint}</Name>
          </dd>
          <dt>Expires</dt>
          <dd>
            <Time iso={new Date(ca.notAfter).toISOString()} />
          </dd>
        </dl>
        <p class="actions">
          <a class="btn btn-primary" href="/v1/ca.pem" download="broker-ca.pem" id="ca-download">
            Download broker-ca.pem
          </a>
        </p>
        <TrustInstructions pemUrl={pemUrl} />
      </Section>
      <Section
        title="Rotate the root certificate"
        id="ca-rotate"
        tone="danger"
        description="Makes a new root. Every client that trusts the old one must download and trust the new one; until then its HTTPS_PROXY connections fail. Connections already open keep working until they reconnect."
      >
        <ConfirmForm action="/settings/ca/rotate" phrase={ROTATE_PHRASE} button="Rotate the root certificate" />
      </Section>
    </>
  );
}
