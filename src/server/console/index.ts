// The web console: server-rendered pages over the same domain functions as the JSON API.

export { consoleRoutes } from "./routes.tsx";
