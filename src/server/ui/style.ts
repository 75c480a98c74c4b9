// The one stylesheet of the server-rendered pages (console and approval page), served from
// /assets/broker.css so the pages' Content-Security-Policy can forbid every inline style and script.
// System fonts only, no external resource. Colours meet WCAG AA in both light and dark schemes.

export const STYLESHEET = `
:root {
  color-scheme: light dark;
  --bg: #f5f6f8;
  --surface: #ffffff;
  --surface-2: #f0f2f5;
  --text: #18202b;
  --muted: #556070;
  --border: #d5dbe3;
  --border-strong: #b5bfcc;
  --accent: #1d4ed8;
  --accent-hover: #1e40af;
  --accent-text: #ffffff;
  --accent-soft: #e6edfc;
  --focus: #2563eb;
  --success: #05603a;
  --success-soft: #e3f4ea;
  --warning: #8a4a03;
  --warning-soft: #fdf1dc;
  --danger: #b42318;
  --danger-hover: #912018;
  --danger-soft: #fde8e7;
  --info: #1e4ea8;
  --info-soft: #e6edfc;
  --shadow: 0 1px 2px rgb(16 24 40 / 6%), 0 1px 3px rgb(16 24 40 / 8%);
  --radius: 10px;
  --radius-small: 6px;
  --mono: ui-monospace, "SF Mono", "Cascadia Mono", "DejaVu Sans Mono", Menlo, Consolas, monospace;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "Helvetica Neue", Arial, sans-serif;
  font-size: 100%;
  line-height: 1.5;
  color: var(--text);
  background: var(--bg);
  -webkit-text-size-adjust: 100%;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #0e1217;
    --surface: #161b22;
    --surface-2: #1d242d;
    --text: #e6eaf0;
    --muted: #9ba6b4;
    --border: #2d3643;
    --border-strong: #43505f;
    --accent: #7aa7ff;
    --accent-hover: #9dbdff;
    --accent-text: #0a1222;
    --accent-soft: #1a2740;
    --focus: #8fb6ff;
    --success: #6fd69b;
    --success-soft: #12291d;
    --warning: #f5b94f;
    --warning-soft: #2d2212;
    --danger: #ff8f85;
    --danger-hover: #ffb0a8;
    --danger-soft: #33171a;
    --info: #9dbdff;
    --info-soft: #1a2740;
    --shadow: none;
  }
}

*, *::before, *::after { box-sizing: border-box; }
html { background: var(--bg); }
body { margin: 0; min-height: 100vh; color: var(--text); background: var(--bg); }
body:not(.console) { max-width: 46rem; margin: 0 auto; padding: 2rem 1rem 3rem; }
img, svg { max-width: 100%; }

/* Type scale: 14 / 16 / 18 / 22 / 28 px */
h1 { font-size: 1.75rem; line-height: 1.25; margin: 0 0 .35rem; font-weight: 650; letter-spacing: -.01em; }
h2 { font-size: 1.1rem; line-height: 1.3; margin: 1.5rem 0 .6rem; font-weight: 650; }
h3 { font-size: 1rem; margin: 1.25rem 0 .5rem; font-weight: 650; }
p { margin: .5rem 0; overflow-wrap: break-word; }
/* Agent-chosen text (hosts, keys, descriptions) breaks anywhere rather than widen the page on a phone. */
.proposed-host { overflow-wrap: anywhere; }
a { color: var(--accent); text-underline-offset: .15em; overflow-wrap: anywhere; }
a:hover { color: var(--accent-hover); }
strong { font-weight: 650; }
code, .name { font-family: var(--mono); font-size: .9em; overflow-wrap: anywhere; }
.name { background: var(--surface-2); border: 1px solid var(--border); border-radius: 4px; padding: .05rem .35rem; }
.muted { color: var(--muted); }
.small { font-size: .875rem; }
.lead { color: var(--muted); margin: 0 0 1.5rem; font-size: 1.05rem; }
.eyebrow { margin: 0 0 .25rem; font-size: .875rem; color: var(--muted); }
.eyebrow a { color: var(--muted); }

:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; border-radius: 3px; }
.skip-link { position: absolute; left: -999px; top: .5rem; background: var(--surface); color: var(--text); padding: .5rem .75rem; border-radius: var(--radius-small); z-index: 10; }
.skip-link:focus { left: .5rem; }

/* Header and navigation */
.site-header { background: var(--surface); border-bottom: 1px solid var(--border); }
.site-header-inner { max-width: 68rem; margin: 0 auto; padding: .75rem 1.25rem; display: flex; align-items: center; gap: 1.5rem; flex-wrap: wrap; }
.brand { display: inline-flex; align-items: center; gap: .55rem; font-weight: 700; font-size: 1.1rem; color: var(--text); text-decoration: none; letter-spacing: -.01em; }
.brand:hover { color: var(--text); }
.brand-mark { width: 1.35rem; height: 1.35rem; border-radius: 6px; background: var(--accent); position: relative; flex: none; }
.brand-mark::after { content: ""; position: absolute; left: 32%; top: 22%; width: 36%; height: 44%; border: 2.5px solid var(--accent-text); border-radius: 50% 50% 3px 3px; border-bottom-width: 5px; }
.site-nav { display: flex; align-items: center; gap: 1rem; flex: 1; flex-wrap: wrap; }
.site-nav ul { display: flex; gap: .25rem; list-style: none; margin: 0; padding: 0; flex: 1; }
.site-nav a { display: block; padding: .4rem .7rem; border-radius: var(--radius-small); color: var(--muted); text-decoration: none; font-weight: 550; }
.site-nav a:hover { color: var(--text); background: var(--surface-2); }
.site-nav a[aria-current="page"] { color: var(--text); background: var(--surface-2); box-shadow: inset 0 -2px 0 var(--accent); }
.site-user { display: flex; align-items: center; gap: .75rem; min-width: 0; }
.site-email { color: var(--muted); font-size: .875rem; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; max-width: 16rem; }
.inline-form { display: inline; margin: 0; }
.provider-sign-in { margin-top: 1rem; max-width: 34rem; }
.provider-sign-in .provider-or { margin: 0 0 .5rem; }
.provider-sign-in .btn { width: 100%; }
#link-provider { margin-top: 1rem; }
.page-brand { margin: 0 0 1.5rem; padding-bottom: .75rem; border-bottom: 1px solid var(--border); }
.session-bar { display: flex; flex-wrap: wrap; align-items: center; gap: .25rem .75rem; margin: .5rem 0 1rem; }

/* Page */
.page { max-width: 68rem; margin: 0 auto; padding: 2rem 1.25rem 3rem; }
.page-narrow { max-width: 30rem; padding-top: 3.5rem; }
.site-footer { max-width: 68rem; margin: 0 auto; padding: 1rem 1.25rem 2rem; color: var(--muted); font-size: .8125rem; border-top: 1px solid var(--border); }

.card { background: var(--surface); border: 1px solid var(--border); border-radius: var(--radius); padding: 1.25rem 1.5rem; margin: 0 0 1.25rem; box-shadow: var(--shadow); }
.card > h2:first-child, .card > h3:first-child { margin-top: 0; }
.card table { margin-bottom: 0; }
.card > p + form, .disclosure > p + form { margin-top: 1rem; }
.card form:not(.form-inline) .field { max-width: 34rem; }
.card-description { color: var(--muted); margin: -.2rem 0 1rem; }
.card-danger { border-color: var(--danger); }
.card-danger > h2 { color: var(--danger); }
.disclosure > summary { cursor: pointer; font-weight: 600; color: var(--accent); }
.disclosure[open] > summary { margin-bottom: .75rem; }

/* Vault header and section tabs */
.vault-header { margin-bottom: 1.5rem; }
.vault-title { display: flex; align-items: center; gap: .6rem; flex-wrap: wrap; margin-bottom: 1rem; }
.vault-name { font-family: var(--mono); font-size: 1.35rem; font-weight: 600; overflow-wrap: anywhere; }
.tabs { border-bottom: 1px solid var(--border); overflow-x: auto; }
.tabs ul { display: flex; flex-wrap: wrap; gap: .25rem; list-style: none; margin: 0; padding: 0; }
.tabs a { display: block; padding: .55rem .8rem; color: var(--muted); text-decoration: none; font-weight: 550; white-space: nowrap; border-bottom: 2px solid transparent; margin-bottom: -1px; }
.tabs a:hover { color: var(--text); }
.tabs a[aria-current="page"] { color: var(--text); border-bottom-color: var(--accent); }
a.vault-name { color: var(--text); text-decoration: none; }
a.vault-name:hover { color: var(--accent); text-decoration: underline; }
/* A pending count: after a tab's name, in the vault list */
.count { display: inline-block; min-width: 1.4rem; padding: 0 .4rem; margin-left: .4rem; border-radius: 999px; background: var(--warning-soft); color: var(--warning); font-size: .75rem; font-weight: 700; line-height: 1.4rem; text-align: center; font-variant-numeric: tabular-nums; vertical-align: .05em; }
.pending-links { display: inline-flex; flex-wrap: wrap; justify-content: flex-end; gap: .25rem .9rem; }
.pending-link { font-weight: 550; text-decoration: none; }
.pending-link .count { margin: 0 .15rem 0 0; }
.visually-hidden { position: absolute; width: 1px; height: 1px; padding: 0; margin: -1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; border: 0; }

/* The vault's overview: what waits, the counts as tiles, the next steps */
.callout { background: var(--warning-soft); border: 1px solid var(--warning); border-left-width: 4px; border-radius: var(--radius-small); padding: .75rem 1rem; margin: 0 0 1.25rem; }
.callout a { font-weight: 650; }
.tiles { list-style: none; margin: 0 0 1.25rem; padding: 0; display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 9rem), 1fr)); gap: .75rem; }
.tile { display: flex; flex-direction: column; height: 100%; padding: .9rem 1rem; background: var(--surface); border: 1px solid var(--border); border-radius: var(--radius); box-shadow: var(--shadow); color: var(--text); text-decoration: none; }
.tile:hover { border-color: var(--accent); color: var(--text); }
.tile-n { font-size: 1.75rem; font-weight: 700; line-height: 1.15; font-variant-numeric: tabular-nums; }
.tile-label { font-weight: 600; font-size: .9375rem; }
.tile-hint { color: var(--muted); font-size: .8125rem; line-height: 1.35; margin-top: .15rem; }
.tile-alert { border-color: var(--warning); background: var(--warning-soft); }
.tile-alert .tile-n { color: var(--warning); }
.steps { list-style: none; margin: 0; padding: 0; counter-reset: step; }
.step { display: flex; gap: .85rem; align-items: flex-start; padding: .7rem 0; }
.step + .step { border-top: 1px solid var(--border); }
.step-mark { flex: none; width: 1.75rem; height: 1.75rem; border-radius: 50%; border: 2px solid var(--border-strong); display: inline-flex; align-items: center; justify-content: center; font-weight: 700; font-size: .875rem; color: var(--muted); counter-increment: step; }
.step-mark:empty::before { content: counter(step); }
.step-done .step-mark { background: var(--success-soft); border-color: var(--success); color: var(--success); }
.step-body { min-width: 0; }
.step-body p { margin: 0; }
.step-title { font-weight: 600; }
.run-label { font-weight: 600; margin: 0 0 .35rem; }
.command { margin: .35rem 0 0; padding: .6rem .85rem; background: var(--surface-2); border: 1px solid var(--border); border-radius: var(--radius-small); white-space: pre-wrap; user-select: all; }
.command code { font-size: .9rem; }
.overview { display: grid; grid-template-columns: max-content 1fr; gap: .6rem 1.5rem; margin: 0; }
.overview dt { font-weight: 600; }
.overview dd { margin: 0; color: var(--muted); }

/* Service rules: plain words beside today's, the line-per-rule box */
.service .overview, .rules-review { margin: .5rem 0 .75rem; }
.service .overview dd, .rules-review dd { color: var(--text); overflow-wrap: anywhere; }
.overview dd.rules-wider { grid-column: 1 / -1; }
.rules-box { font-family: var(--mono); font-size: .9rem; line-height: 1.45; }
.card form:not(.form-inline) .rules-field { max-width: 44rem; }
.plain-list { list-style: none; padding: 0; margin: .5rem 0 1rem; }
.plain-list > li + li { margin-top: 1rem; padding-top: 1rem; border-top: 1px solid var(--border); }

/* Flash messages and notices */
.flash, .form-error, .warning { overflow-wrap: anywhere; border-radius: var(--radius-small); padding: .75rem 1rem; margin: 0 0 1.25rem; border: 1px solid; border-left-width: 4px; }
.flash-success { background: var(--success-soft); border-color: var(--success); color: var(--text); }
.flash-error, .form-error { background: var(--danger-soft); border-color: var(--danger); color: var(--text); }
.flash-info { background: var(--info-soft); border-color: var(--info); color: var(--text); }
.warning { background: var(--warning-soft); border-color: var(--warning); color: var(--text); margin: 1rem 0; }
.note { border-left: 4px solid var(--border-strong); background: var(--surface-2); border-radius: var(--radius-small); padding: .5rem .85rem; margin: .5rem 0; white-space: pre-wrap; overflow-wrap: anywhere; }
.instructions { white-space: pre-wrap; overflow-wrap: anywhere; }
/* A held request's body scrolls in its own box: a 64 KiB body must not push Allow and Deny a page-height away. */
.body-text { max-height: 36rem; overflow: auto; }

/* Badges */
.badge { display: inline-block; padding: .1rem .55rem; border-radius: 999px; font-size: .8125rem; font-weight: 600; line-height: 1.5; white-space: nowrap; background: var(--surface-2); color: var(--muted); border: 1px solid var(--border); vertical-align: .05em; }
.badge-success { background: var(--success-soft); color: var(--success); border-color: transparent; }
.badge-warning { background: var(--warning-soft); color: var(--warning); border-color: transparent; }
.badge-danger { background: var(--danger-soft); color: var(--danger); border-color: transparent; }
.badge-info { background: var(--info-soft); color: var(--info); border-color: transparent; }

/* Forms */
form { margin: 0; }
.field { margin: 0 0 1rem; }
label { display: block; margin: 0 0 .3rem; font-weight: 600; font-size: .9375rem; overflow-wrap: anywhere; }
input[type=text], input[type=email], input[type=password], input[type=url], input[type=number], input[type=search], input:not([type]), select, textarea {
  display: block; width: 100%; padding: .55rem .7rem; font: inherit; color: var(--text); background: var(--surface);
  border: 1px solid var(--border-strong); border-radius: var(--radius-small); min-height: 2.6rem;
}
textarea { min-height: 6rem; resize: vertical; }
input:hover, select:hover, textarea:hover { border-color: var(--muted); }
input:focus-visible, select:focus-visible, textarea:focus-visible { outline: 3px solid var(--focus); outline-offset: 1px; border-color: var(--focus); }
.field-invalid input, input[aria-invalid="true"] { border-color: var(--danger); }
.hint { color: var(--muted); font-size: .875rem; margin: .3rem 0 0; }
.field-error { color: var(--danger); font-size: .875rem; margin: .3rem 0 0; font-weight: 550; }
/* min-width: 0 lets a fieldset shrink to a phone's width (its default is its content's, so a long link overflowed) */
fieldset { border: 1px solid var(--border); border-radius: var(--radius); margin: 1rem 0; padding: .75rem 1.25rem 1rem; background: var(--surface); min-width: 0; }
legend { padding: 0 .4rem; font-weight: 600; }
fieldset label { margin-top: .75rem; }
/* Radio and checkbox choices: the label is the whole row, its help text stays light */
.choice { display: flex; gap: .6rem; align-items: baseline; font-weight: 400; margin: .5rem 0 0; cursor: pointer; }
.choice input { margin: 0; flex: none; }
.choice strong { font-weight: 600; }
.revealed { font-family: var(--mono); font-size: 1rem; padding: .75rem 1rem; user-select: all; }
.actions { display: flex; gap: .75rem; margin-top: 1.25rem; flex-wrap: wrap; align-items: center; }
.form-inline { display: flex; gap: 1rem; align-items: flex-start; flex-wrap: wrap; }
.form-inline .field { flex: 1 1 18rem; margin: 0; }
.form-inline .actions { margin-top: 1.85rem; }
/* A one-time value and its Copy button share a line (the label sits above both, not inside the row). */
.copy-field .form-inline { align-items: center; }
.copy-field .form-inline input { flex: 1 1 16rem; width: auto; min-width: 0; }
.copy-field .form-inline .copy-actions { margin-top: 0; }

/* Buttons (bare <button> is the approval page's secondary) */
.btn, button {
  display: inline-flex; align-items: center; justify-content: center; gap: .4rem; min-height: 2.5rem; padding: .5rem 1.1rem;
  font: inherit; font-weight: 600; line-height: 1.2; text-decoration: none; cursor: pointer; overflow-wrap: anywhere;
  border-radius: var(--radius-small); border: 1px solid var(--border-strong); background: var(--surface); color: var(--text);
}
.btn:hover, button:hover { background: var(--surface-2); color: var(--text); }
.btn-primary, button.allow { background: var(--accent); border-color: var(--accent); color: var(--accent-text); }
.btn-primary:hover, button.allow:hover { background: var(--accent-hover); border-color: var(--accent-hover); color: var(--accent-text); }
.btn-danger { background: var(--surface); border-color: var(--danger); color: var(--danger); }
.btn-danger:hover { background: var(--danger); border-color: var(--danger); color: var(--surface); }
.confirm-form .btn-danger, .card-danger .btn-danger { background: var(--danger); color: #fff; }
.confirm-form .btn-danger:hover, .card-danger .btn-danger:hover { background: var(--danger-hover); border-color: var(--danger-hover); }
@media (prefers-color-scheme: dark) { .confirm-form .btn-danger, .card-danger .btn-danger { color: #1a0a09; } }
.btn-link { background: none; border-color: transparent; color: var(--accent); padding-left: .4rem; padding-right: .4rem; }
.btn-link:hover { background: var(--surface-2); color: var(--accent-hover); }
.btn-small { min-height: 2rem; padding: .3rem .75rem; font-size: .875rem; }
button.deny { background: var(--surface); }

/* Service forms: fields side by side where there is room; a key choice's new-name field shows only while "A new key" is chosen
   (where the browser supports :has; elsewhere it stays visible and the server ignores it). */
.form-grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 17rem), 1fr)); gap: 0 1.25rem; }
.form-grid > .field-wide { grid-column: 1 / -1; }
.card form:not(.form-inline) .type-line { max-width: none; }
.new-key { margin: .5rem 0 0; padding: .1rem 0 0 .85rem; border-left: 3px solid var(--border); }
.new-key label { font-weight: 550; }
.key-choice:has(select option[value="*new"]:not(:checked)) .new-key { display: none; }
.type-line p { margin: 0; }
.obtain { margin: 0 0 1rem; }
.section-actions { display: flex; justify-content: flex-end; gap: .75rem; flex-wrap: wrap; margin: -.25rem 0 1rem; }
.template-said { margin-bottom: .25rem; }
.catalogue-note { margin-top: .5rem; padding-top: .5rem; border-top: 1px dashed var(--border); }
.catalogue-note p { margin: 0 0 .4rem; }
/* Pick lists: the catalogue's templates and the auth types, each a whole-card link */
.search-row { display: flex; gap: .5rem; }
.search-row input { flex: 1 1 auto; min-width: 0; }
.pick-list { list-style: none; margin: .75rem 0 0; padding: 0; display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 15rem), 1fr)); gap: .6rem; }
.pick { display: flex; flex-direction: column; gap: .1rem; height: 100%; padding: .6rem .85rem; border: 1px solid var(--border); border-radius: var(--radius-small); background: var(--surface); color: var(--text); text-decoration: none; }
.pick:hover { border-color: var(--accent); background: var(--surface-2); color: var(--text); }
.pick[aria-current] { border-color: var(--accent); }
.pick-name { font-weight: 650; color: var(--accent); }
.pick-hosts { font-family: var(--mono); font-size: .8125rem; color: var(--muted); overflow-wrap: anywhere; }
.pick-auth { font-size: .8125rem; color: var(--muted); overflow-wrap: anywhere; }
.search-row .btn { flex: none; }
.pick-bar { display: flex; align-items: center; justify-content: space-between; gap: .5rem 1rem; flex-wrap: wrap; margin: .6rem 0 0; }
.pick-bar p { margin: 0; }
@media (max-width: 40rem) {
  .card fieldset { padding: .5rem .75rem .75rem; }
  .pick-keys { display: none; }
  .pick-list { gap: 0; border: 1px solid var(--border); border-radius: var(--radius-small); }
  .pick-list > li + li .pick { border-top: 1px solid var(--border); }
  .pick { display: block; border: 0; border-radius: 0; padding: .45rem .75rem; }
  .pick-name { display: block; }
  .pick-hosts + .pick-auth::before { content: " · "; }
}

/* Secret stores: the sign-in method as a row of links, a store's error in words, shares one per row */
.method-picker { display: flex; align-items: center; flex-wrap: wrap; gap: .35rem .75rem; margin: .25rem 0 1rem; }
.method-picker ul { display: flex; flex-wrap: wrap; gap: .4rem; list-style: none; margin: 0; padding: 0; }
.method-picker a { display: block; padding: .3rem .75rem; border: 1px solid var(--border); border-radius: 999px; text-decoration: none; font-weight: 550; font-size: .9375rem; }
.method-picker a:hover { border-color: var(--accent); background: var(--surface-2); }
.method-picker a[aria-current] { background: var(--accent-soft); border-color: var(--accent); color: var(--text); }
.read-error { color: var(--danger); overflow-wrap: anywhere; }
.read-error .badge { vertical-align: .05em; }
.share-row { display: flex; align-items: center; justify-content: space-between; gap: .75rem; flex-wrap: wrap; }
.plain-list.shares > li + li { margin-top: .5rem; padding-top: .5rem; }
.pick-hosts.pick-help { font-family: inherit; }
.slot-ref { margin-top: .25rem; max-width: 46rem; grid-template-columns: repeat(auto-fit, minmax(min(100%, 14rem), 1fr)); }
.form-grid.ref-grid { grid-template-columns: repeat(auto-fit, minmax(min(100%, 13rem), 1fr)); }
.slot-or { margin: .75rem 0 .25rem; font-weight: 600; }

/* Budgets: each limit's use in words over a bar (a <progress>, so no inline style), coloured by how close it is;
   the scope's own field shows under its choice while it is chosen (where :has works; elsewhere all show). */
.budget-usage { list-style: none; margin: 0; padding: 0; min-width: 10rem; }
.budget-measure + .budget-measure { margin-top: .5rem; }
.budget-measure-line { display: flex; justify-content: space-between; gap: 0 .75rem; flex-wrap: wrap; font-size: .875rem; }
.budget-measure-label { font-weight: 600; }
.budget-measure-n { font-variant-numeric: tabular-nums; white-space: nowrap; }
.budget-bar { display: block; width: 100%; height: .5rem; margin: .2rem 0 0; -webkit-appearance: none; appearance: none; border: 0; border-radius: 999px; background: var(--surface-2); color: var(--success); overflow: hidden; }
.budget-bar::-webkit-progress-bar { background: var(--surface-2); border-radius: 999px; box-shadow: inset 0 0 0 1px var(--border); }
.budget-bar::-webkit-progress-value { background: currentColor; border-radius: 999px; }
.budget-bar::-moz-progress-bar { background: currentColor; border-radius: 999px; }
.budget-bar-soft { color: var(--warning); }
.budget-bar-exceeded { color: var(--danger); }
.budget-unpriced { margin: .4rem 0 0; }
.budget-nowrap { white-space: nowrap; }
.budget-period { display: inline-flex; flex-direction: column; gap: .15rem; }
.budget-state { display: inline-flex; flex-direction: column; align-items: flex-start; gap: .25rem; }
.budget-actions { display: inline-flex; flex-direction: column; align-items: stretch; gap: .4rem; }
.budget-actions .inline-form { display: flex; }
.budget-actions .inline-form .btn { flex: 1 1 auto; }
.remove-box { border: 1px solid var(--danger); border-left-width: 4px; border-radius: var(--radius-small); padding: .75rem 1.25rem .5rem; margin: 1rem 0 1.25rem; background: var(--surface); }
.remove-box > h3 { margin-top: 0; color: var(--danger); }
.scope-choice + .scope-choice { margin-top: .4rem; }
.scope-extra { margin: .5rem 0 .5rem 1.6rem; max-width: 30rem; }
.scope-extra label { margin-top: 0; }
.scope-choice:has(> .choice input:not(:checked)) .scope-extra { display: none; }
.field-label { font-weight: 600; font-size: .9375rem; margin: 0 0 .3rem; }
@media (max-width: 40rem) {
  .table td.budget-used-cell { flex-direction: column; align-items: stretch; text-align: left; }
  .table td.budget-used-cell > .cell { width: 100%; }
  .budget-usage { min-width: 0; }
  .budget-state, .budget-period { align-items: flex-end; }
  .budget-actions { flex-direction: row; flex-wrap: wrap; justify-content: flex-end; }
  .scope-extra { margin-left: 0; }
}

/* Tables */
.table-wrap { overflow-x: auto; margin: 0 -.25rem; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0 1rem; font-size: .9375rem; }
caption { text-align: left; color: var(--muted); padding-bottom: .4rem; }
th, td { text-align: left; padding: .6rem .75rem; border-bottom: 1px solid var(--border); vertical-align: middle; overflow-wrap: anywhere; }
/* Headings and names break only where no room is left: a host or key cut mid-label is hard to check. */
@media (min-width: 48rem) { th, td, td code, td .name { overflow-wrap: break-word; } }
th { font-size: .8125rem; font-weight: 600; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; background: var(--surface-2); }
tbody tr:hover { background: var(--surface-2); }
tbody tr:last-child td { border-bottom: 0; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.actions-cell { text-align: right; white-space: nowrap; }
.strong-link { font-weight: 600; text-decoration: none; }
.strong-link:hover .name { border-color: var(--accent); }

/* Empty states */
.empty { text-align: center; padding: 2rem 1.25rem; border: 1px dashed var(--border-strong); border-radius: var(--radius); background: var(--surface-2); }
.empty-title { font-weight: 650; font-size: 1.05rem; margin: 0 0 .35rem; }
.empty-body { color: var(--muted); max-width: 34rem; margin: 0 auto; }
.empty-action { margin-top: 1rem; }

/* Phones: stack the header, tables become cards whose cells carry their column label */
@media (max-width: 40rem) {
  h1 { font-size: 1.5rem; }
  .page { padding: 1.25rem 1rem 2rem; }
  .page-narrow { padding-top: 1.5rem; }
  .card { padding: 1rem; }
  .site-header-inner { padding: .6rem 1rem; gap: .5rem 1rem; }
  .site-nav { flex-basis: 100%; justify-content: space-between; }
  .site-nav ul { flex: 1 1 auto; flex-wrap: wrap; gap: .15rem; }
  .site-nav a { padding: .35rem .55rem; }
  .site-email { max-width: 10rem; }
  .table-wrap { margin: 0; }
  .table thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
  .table, .table tbody, .table tr, .table td { display: block; width: 100%; }
  .table tr { border: 1px solid var(--border); border-radius: var(--radius-small); margin: 0 0 .75rem; padding: .35rem .75rem; background: var(--surface); }
  .table td { border: 0; padding: .35rem 0; display: flex; gap: .75rem; justify-content: space-between; align-items: center; text-align: right; }
  .table td > .cell { min-width: 0; }
  .table td::before { content: attr(data-label); font-size: .8125rem; font-weight: 600; color: var(--muted); text-align: left; flex: none; }
  .table td[data-label=""]::before { content: none; }
  .table td.actions-cell { justify-content: flex-end; }
  .overview { grid-template-columns: 1fr; gap: .2rem; }
  .tabs a { padding: .45rem .55rem; }
  .tile { padding: .6rem .75rem; }
  .tile-n { font-size: 1.35rem; }
  .tile-hint { display: none; }
  .overview dd { margin-bottom: .6rem; }
  .actions .btn, .actions button { flex: 1 1 auto; }
  .form-inline .actions { margin-top: 0; flex-basis: 100%; }
}
@media (prefers-reduced-motion: no-preference) { .btn, button, .site-nav a, .tabs a { transition: background-color .12s, color .12s, border-color .12s; } }
`;
