/** @jsxImportSource hono/jsx */
// The HTML document shell of every server-rendered page (console and approval page): doctype, lang,
// meta tags, title and the one stylesheet. No inline script or style ever: the pages' CSP forbids them.

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
