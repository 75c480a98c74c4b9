// A GitHub App key pasted into a one-line field (browsers drop line breaks from password inputs)
// is put back into PEM lines before it is parsed; anything else is left alone.

import { expect, test } from "bun:test";
import { createPrivateKey, generateKeyPairSync } from "node:crypto";
import { reflowPem } from "../../../src/minting/minted-tokens.ts";

const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });

test.each(["pkcs1", "pkcs8"] as const)("a %s key with its line breaks removed parses again", (type) => {
  const pem = privateKey.export({ type, format: "pem" }).toString();
  expect(reflowPem(pem)).toBe(pem);
  for (const flat of [pem.replace(/\n/g, ""), pem.replace(/\n/g, " "), `  ${pem.replace(/\n/g, "\r\n")}`]) {
    expect(() => createPrivateKey(flat)).toThrow();
    expect(createPrivateKey(reflowPem(flat)).export({ type: "pkcs8", format: "pem" })).toEqual(privateKey.export({ type: "pkcs8", format: "pem" }));
  }
});

test("text that is not one PEM block is returned as it is", () => {
  for (const t of ["sk-live-123", "-----BEGIN X-----abc-----END Y-----", ""]) expect(reflowPem(t)).toBe(t);
});
