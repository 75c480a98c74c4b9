// (module index: describe this module)
export { createMinter } from "./minted.ts";
