// (module index: describe this module)
export { createMinter, type Minter, type MintedState } from "./minted.ts";
