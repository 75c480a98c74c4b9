// "Did you mean": edit distance and the choice of the closest real names.

import { describe, expect, test } from "bun:test";
import { closestNames, editDistance, orList } from "../../../src/cli/kit/suggest.ts";

describe("editDistance", () => {
  test.each([
    ["vault", "vault", 0],
    ["vualt", "vault", 1], // two swapped letters are one edit
    ["valt", "vault", 1],
    ["vaultt", "vault", 1],
    ["vbult", "vault", 1],
    ["", "abc", 3],
    ["kitten", "sitting", 3],
  ])("%s → %s is %d", (a, b, d) => {
    expect(editDistance(a, b)).toBe(d);
    expect(editDistance(b, a)).toBe(d);
  });
});

describe("closestNames", () => {
  const commands = ["server", "vault", "agent", "credential", "service", "ca", "completion"];

  test("a typo finds the name it meant", () => {
    expect(closestNames("vualt", commands)).toEqual(["vault"]);
    expect(closestNames("credentail", commands)).toEqual(["credential"]);
    expect(closestNames("VAULT", ["vault"])).toEqual(["vault"]);
  });

  test("a beginning of two letters or more finds the names it starts", () => {
    expect(closestNames("va", commands)).toEqual(["vault"]);
    expect(closestNames("se", commands)).toEqual(["server", "service"]);
  });

  test("nothing close enough is no guess at all", () => {
    expect(closestNames("xyzzy", commands)).toEqual([]);
    expect(closestNames("q", commands)).toEqual([]);
    expect(closestNames("value", ["vault", "json"])).toEqual([]); // two edits on a short word is too far
  });

  test("orList", () => {
    expect(orList(["a"])).toBe("a");
    expect(orList(["a", "b"])).toBe("a or b");
    expect(orList(["a", "b", "c"])).toBe("a, b or c");
  });
});
