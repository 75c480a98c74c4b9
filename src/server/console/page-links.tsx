/** @jsxImportSource hono/jsx */
// The links between the pages of a console list that can grow (services, agents, sessions, proposals,
// held requests): one page is shown at a time, with a plain link to the next one and back to the first.
// No script: the cursor travels in the link's query, as the API's `next_cursor` does.

import { LinkButton } from "../ui/index.ts";

/** Entries on one page of a console list. */
export const CONSOLE_PAGE_SIZE = 50;

export interface PageLinksProps {
  readonly id: string;
  /** What the navigation is, for a screen reader ("Service pages"). */
  readonly label: string;
  /** The list's own page, without a query. */
  readonly base: string;
  /** The query parameter the list takes its cursor by, as its API does. */
  readonly param: "after" | "before";
  readonly next: string | null;
  /** Whether this page is not the first one. */
  readonly later: boolean;
  /** The next link's word: "Next" in a list read forward, "Older" in one read newest first. */
  readonly word?: "Next" | "Older";
}

export function PageLinks(props: PageLinksProps) {
  if (props.next === null && !props.later) return null;
  return (
    <nav class="actions" aria-label={props.label} id={props.id}>
      {props.later ? <LinkButton href={props.base}>First page</LinkButton> : null}
      {props.next !== null ? <LinkButton href={`${props.base}?${props.param}=${encodeURIComponent(props.next)}`}>{props.word ?? "Next"} →</LinkButton> : null}
    </nav>
  );
}
