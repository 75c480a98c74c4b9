// Attacks beyond issue 31 item 5's list, found by trying them against the normalizing echo scanner
// (e6ffe3d, 7e98554): each one got an injected value past it when it was added here. TRICKS are the
// ones the broker now holds (escapes and invisible characters it reads, same-named header lines between
// others, trailers), served by echo-forms-upstream.ts as /trick/<index>. NOT_COVERED names the ones
// that still get a value out by design, each a limit README's "Not covered" lists (double encodings,
// hex dumps, quoted-printable, overlong UTF-8, look-alike letters, other text encodings, markup or
// visible text between pieces, pieces spread over the reason phrase, header names, trailers, events).

import { AFTER, AROUND_HEADER, BEFORE, TABLES, type Form, type Place, type Rendered, type Subjects } from "./echo-forms-upstream.ts";

const BODY_AND_HEADER: readonly Place[] = ["body", "header"];
const hex = (n: number, w = 2) => n.toString(16).padStart(w, "0");
const each = (s: string, f: (c: string, i: number) => string) => [...s].map(f).join("");
/** `sep` after every `n` characters (not at the end). */
const every = (s: string, n: number, sep: string) => s.replace(new RegExp(`([\\s\\S]{${n}})(?!$)`, "g"), `$1${sep}`);
/** The value in pieces shorter than the 12 characters the scanner looks for. */
const pieces = (v: string, n = 6) => v.match(new RegExp(`[\\s\\S]{1,${n}}`, "g"))!;
/** A hostile agent's reassembly: every `part<i>=<piece>;` it received, in order of i. */
export const reassembleParts = (received: string) =>
  [...received.matchAll(/part(\d+)=([^;\s]*);/gi)]
    .sort((a, b) => Number(a[1]) - Number(b[1]))
    .filter((m, i, all) => i === 0 || all[i - 1]![1] !== m[1])
    .map((m) => m[2])
    .join("");
const plainText = () => Buffer.from(`${BEFORE}\n${AFTER}\n`);
const base = (): Rendered => ({ headers: [[AROUND_HEADER[0], AROUND_HEADER[1]]], body: plainText(), contentType: "text/plain; charset=utf-8" });

function decodingGaps(): Form[] {
  const f = (id: string, echo: (s: Subjects) => string): Form => ({ id, places: BODY_AND_HEADER, echo });
  return [
    // Escapes read one layer deep.
    f("%uXXXX (IIS, JavaScript escape())", (s) => each(s.value, (c) => `%u${hex(c.charCodeAt(0), 4)}`)),
    f("\\u{XX} (ES2015 code point escapes)", (s) => each(s.value, (c) => `\\u{${hex(c.charCodeAt(0))}}`)),
    f("octal escapes \\163 (C, PHP, shell $'...')", (s) => each(s.value, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, "0")}`)),
    // Invisible characters, as entities or beyond item 5's few.
    ...["&shy;", "&ZeroWidthSpace;", "&zwnj;", "&zwj;", "&NoBreak;"].map((e) => f(`named entity ${e} every 3 characters`, (s) => every(s.value, 3, e))),
    f("named entity &shy without its semicolon (a legacy entity browsers still decode) every 3 characters", (s) => every(s.value, 3, "&shy")),
    ...(
      [
        ["U+2066 (left-to-right isolate)", "\u2066"],
        ["U+2069 (pop directional isolate)", "\u2069"],
        ["U+202C (pop directional formatting)", "\u202c"],
        ["U+061C (Arabic letter mark)", "\u061c"],
        ["U+FE0F (variation selector 16)", "\ufe0f"],
        ["U+180B (Mongolian free variation selector)", "\u180b"],
      ] as const
    ).map(([name, ch]) => f(`${name} every 3 characters`, (s) => every(s.value, 3, ch))),
  ];
}

/** Splits over what the scanner reads separately, each piece under 12 characters. */
function channelSplits(): Form[] {
  const custom = (id: string, render: (s: Subjects) => Rendered, reassemble: Form["reassemble"] | null = reassembleParts): Form => ({
    id,
    places: ["custom"],
    echo: () => "",
    render,
    ...(reassemble && { reassemble }),
  });
  return [
    custom(
      "same-named header lines interleaved with another header (x-echo, x-pad, x-echo, ...)",
      (s) => ({
        ...base(),
        headers: [
          ...base().headers,
          ...pieces(s.value).flatMap((p): [string, string][] => [
            ["x-echo", p],
            ["x-pad", "-"],
          ]),
        ],
      }),
      null, // the checker joins same-named lines itself, as every HTTP client does
    ),
    // Held on /proxy and the HTTP/1.1 tunnel because HTTP/1.1 trailers are not forwarded; over HTTP/2 it is a split
    // with visible text around each piece (NOT_COVERED below).
    custom("pieces in trailers of one name, between other trailers", (s) => ({
      ...base(),
      trailers: pieces(s.value).flatMap((p, i): [string, string][] => [
        ["x-echo", `part${i}=${p};`],
        ["x-pad", "-"],
      ]),
    })),
  ];
}

export const TRICKS: readonly Form[] = [...decodingGaps(), ...channelSplits()];
TABLES.set("trick", TRICKS);

/**
 * Attacks that get a value out by design: each is a transform README's "No reveal by echo: what is
 * covered" lists under "Not covered" (`readme` says which entry). They stay named here, as test.todo on
 * the paths in `on` (every path when absent), so the list of known limits is visible in every run.
 * Checked when they were moved here: each leaked the whole value (or a 12-character run) on every path.
 */
export interface NotCovered {
  readonly id: string;
  readonly readme: string;
  readonly on?: readonly string[];
}

const TWICE = "a value encoded twice";
const SPREAD = "a value spread over several parts of one response, in pieces shorter than 12 characters";
const INTERLEAVED = "a value interleaved with other visible text or markup, in pieces shorter than 12 characters";

export const NOT_COVERED: readonly NotCovered[] = [
  { id: "double percent-encoding (%2573: a URL-encoded URL)", readme: TWICE },
  { id: "HTML-escaped numeric entities (&amp;#115;: escaped twice)", readme: TWICE },
  { id: "JSON inside a JSON string (\\\\u0073)", readme: TWICE },
  { id: "JSON \\u escape of an HTML entity (\\u0026#115;)", readme: TWICE },
  { id: "percent-encoded HTML entities (%26%23115%3B)", readme: TWICE },
  { id: "base64 of base64 of the value (a Kubernetes Secret read through a base64 API)", readme: TWICE },
  { id: "base64 of base64 of 'Bearer <value>'", readme: TWICE },
  { id: "base64 of the value percent-encoded", readme: TWICE },
  { id: "base64 of the value upper-cased", readme: TWICE },
  { id: "base64 of hex of the value", readme: TWICE },
  { id: "hex of base64 of the value", readme: TWICE },
  { id: "base64 of the UTF-16LE value (PowerShell -EncodedCommand)", readme: TWICE },
  { id: "hex of the UTF-16LE value", readme: TWICE },
  { id: "base64 of a gzip of JSON holding the value (CloudWatch/Kinesis records)", readme: TWICE },
  { id: "hex of the value upper-cased", readme: TWICE },
  { id: "base64 folded every 8 characters", readme: INTERLEAVED },
  { id: "HTML numeric entities with 70 leading zeros (browsers decode them)", readme: "numeric references of more than 64 digits" },
  { id: "HTML hex entities with 70 leading zeros", readme: "numeric references of more than 64 digits" },
  { id: "quoted-printable =73=6B (MIME mail bodies)", readme: "quoted-printable" },
  { id: "hex dump, bytes separated by spaces (73 6b 2d ...)", readme: "hex dumps with separators" },
  { id: "hex dump, xxd groups of two bytes", readme: "hex dumps with separators" },
  { id: "C array of bytes (0x73,0x6b,...)", readme: "hex dumps with separators" },
  { id: "overlong UTF-8, two bytes per character (C1 B3 ...)", readme: "overlong UTF-8" },
  { id: "overlong UTF-8 percent-encoded (%C1%B3 ...)", readme: "overlong UTF-8" },
  { id: "fullwidth forms (NFKC folds them to ASCII)", readme: "look-alike letters" },
  { id: "mathematical bold letters and digits (NFKC folds them)", readme: "look-alike letters" },
  { id: "65 zero-width spaces between every 6 characters (past the scanner's run of 64)", readme: "more than 64 invisible characters in a row" },
  { id: "UTF-16LE text with a soft hyphen every 3 characters", readme: "invisible characters in UTF-16 text" },
  { id: "UTF-32LE text (charset=utf-32le)", readme: "text in another encoding" },
  { id: "EBCDIC text (charset=cp037, which Python's requests decodes)", readme: "text in another encoding" },
  { id: "<wbr> every 3 characters (how pages let long tokens wrap)", readme: INTERLEAVED },
  { id: "<wbr/> every 5 characters", readme: INTERLEAVED },
  { id: "HTML comments <!----> every 3 characters", readme: INTERLEAVED },
  { id: "ANSI colour escapes every 3 characters (CI and container logs)", readme: INTERLEAVED },
  { id: "U+E0020 (tag space) every 3 characters", readme: "tag characters (U+E0000-U+E007F)" },
  { id: "one header line, the pieces as a list (a, b, c)", readme: INTERLEAVED },
  { id: "pieces spread over the reason phrase, a header, the body and a trailer", readme: SPREAD },
  { id: "pieces in header names (x-part0-<piece>-: 1)", readme: SPREAD },
  { id: "server-sent events, one piece per event, 20 ms apart", readme: "a value spread over several messages of one response (server-sent events)" },
  { id: "pieces in trailers of one name, between other trailers", readme: INTERLEAVED, on: ["tunnel HTTP/2"] },
];

/** The same for WebSocket messages through the tunnel (WS_SCENARIOS in echo-forms-upstream.ts holds the ones that are held). */
export const WS_NOT_COVERED: readonly NotCovered[] = [
  { id: "pieces, one message each", readme: "a value spread over several messages of one response (WebSocket messages)" },
  { id: "double percent-encoding in one message", readme: TWICE },
];
