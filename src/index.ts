// Entry point of the `broker` binary. The reflect polyfill must load before @peculiar/x509.
import "reflect-metadata";
import { main } from "./cli/index.ts";

process.exitCode = await main(process.argv.slice(2));
