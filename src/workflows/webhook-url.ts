// How a webhook's receiver URL is shown after creation. A Slack incoming-webhook URL is itself a
// credential (its path is the secret), so lists never carry it whole: only the 201 of creation does.

const HIDDEN = "…";

/**
 * Scheme, host, port and the first path segment when more follow; the rest of the path and any query
 * become "…". A path of one segment is hidden too: services such as webhook.site make it the secret.
 */
export function maskWebhookReceiver(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return HIDDEN;
  }
  const [first = "", ...rest] = url.pathname.slice(1).split("/");
  if (first && rest.length === 0) return `${url.protocol}//${url.host}/${HIDDEN}`;
  const shown = `${url.protocol}//${url.host}/${first}`;
  const tail = rest.join("/");
  if (tail) return `${shown}/${HIDDEN}`;
  const slash = rest.length ? "/" : "";
  return url.search ? `${shown}${slash}?${HIDDEN}` : `${shown}${slash}`;
}
