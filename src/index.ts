// Entry point of the `broker` binary. The reflect polyfill must load before @peculiar/x509.
import "reflect-metadata";
import { main, runContainedSide } from "./cli/index.ts";

// Started by `vault run --contain` inside its namespaces: the relay and the agent's command, no CLI.
const contained = process.env.BROKER_CONTAIN_INSIDE;
if (contained) process.exit(await runContainedSide(contained));
process.exitCode = await main(process.argv.slice(2));
