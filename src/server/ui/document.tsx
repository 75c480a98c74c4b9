/** @jsxImportSource hono/jsx */
// The HTML document shell of every server-rendered page (console and approval page): doctype, lang,
// meta tags, title and the one stylesheet, and the product's mark for pages outside the console layout.
// No inline script or style ever: the pages' CSP forbids them.

import { raw } from "hono/html";
import type { Child } from "hono/jsx";

export interface DocumentProps {
  readonly title: string;
  /** Declares the light and dark colour schemes (`<meta name="color-scheme">`). */
  readonly colorScheme?: boolean;
  /** Loads /assets/<name>.js, deferred (the page must also be served with scripts allowed). */
  readonly script?: string;
  readonly bodyClass?: string;
  readonly children?: Child;
}

export function Document(props: DocumentProps) {
  return (
    <>
      {raw("<!DOCTYPE html>")}
      <html lang="en">
        <head>
          <meta charset="utf-8" />
          <meta name="viewport" content="width=device-width, initial-scale=1" />
          <meta name="referrer" content="no-referrer" />
          {props.colorScheme ? <meta name="color-scheme" content="light dark" /> : null}
          <title>{props.title}</title>
          <link rel="stylesheet" href="/assets/broker.css" />
          {props.script ? <script src={`/assets/${props.script}.js`} defer /> : null}
        </head>
        <body class={props.bodyClass}>{props.children}</body>
      </html>
    </>
  );
}

/** The product's mark, as in the console's header, linking to the console. */
export function Brand() {
  return (
    <header class="page-brand">
      <a class="brand" href="/">
        <span class="brand-mark" aria-hidden="true" />
        Broker
      </a>
    </header>
  );
}
