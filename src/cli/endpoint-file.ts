/** `<state dir>/endpoint.json`: `{pid, http, ui}` of the running daemon, written by `berth daemon`, read by `berth open`. */
export const ENDPOINT_FILE = "endpoint.json";
