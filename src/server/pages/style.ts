// The one stylesheet of the server-rendered pages, served from /assets/broker.css so the pages'
// Content-Security-Policy can forbid every inline style and script.

export const STYLESHEET = `
:root { color-scheme: light dark; font-family: system-ui, sans-serif; line-height: 1.45; }
body { max-width: 46rem; margin: 2rem auto; padding: 0 1rem; }
h1 { font-size: 1.4rem; margin-bottom: .25rem; }
.muted { color: #777; }
.badge { display: inline-block; padding: .1rem .5rem; border-radius: .75rem; background: #8883; font-size: .85rem; }
.warning { border-left: 4px solid #d97706; background: #d9770622; padding: .5rem .75rem; margin: 1rem 0; }
.note { border-left: 4px solid #888; padding: .25rem .75rem; margin: .5rem 0; white-space: pre-wrap; overflow-wrap: anywhere; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0 1rem; }
th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid #8884; vertical-align: top; overflow-wrap: anywhere; }
fieldset { border: 1px solid #8886; border-radius: .5rem; margin: 1rem 0; padding: .75rem 1rem; }
label { display: block; margin: .5rem 0 .2rem; font-weight: 600; }
input[type=password], input[type=email] { width: 100%; padding: .4rem; box-sizing: border-box; }
.actions { display: flex; gap: .75rem; margin-top: 1rem; }
button { padding: .5rem 1.25rem; font-size: 1rem; border-radius: .4rem; border: 1px solid #8888; cursor: pointer; }
button.allow { background: #15803d; color: white; border-color: #15803d; }
button.deny { background: transparent; }
.instructions { white-space: pre-wrap; overflow-wrap: anywhere; }
`;
