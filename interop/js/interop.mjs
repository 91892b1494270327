// Interop check of a running a2astore staging server against the official
// A2A JavaScript SDK (@a2a-js/sdk, pinned in package-lock.json) on all
// three transports: agent card (and its caching), send, get, full
// traversals (also switching transport on every page), filters, error codes
// (including SPEC W6, W7 and W10), cancel, subscribe, owner isolation,
// version negotiation (W8), push-config calls the card does not declare,
// and SendMessage's historyLength.
//
// The server must run with -policy owner and -caller-header
// X-A2astore-Caller, and its agent must hold every task whose message is
// "hold" until the task is canceled (cmd/a2astore-server's
// TestInteropJS starts one). Usage:
//
//	A2A_URL=http://127.0.0.1:8080 node interop.mjs
//
// Prints one line per failed check and a summary; exits 1 on any failure.

import { randomUUID } from "node:crypto";
import { ClientFactory, JsonRpcTransportFactory, RestTransportFactory } from "@a2a-js/sdk/client";
import { GrpcTransportFactory } from "@a2a-js/sdk/client/grpc";
import { Role, TaskState } from "@a2a-js/sdk";

const base = process.env.A2A_URL;
if (!base) {
  console.error("A2A_URL is not set");
  process.exit(2);
}
const callerHeader = process.env.A2A_CALLER_HEADER || "X-A2astore-Caller";
const transports = ["JSONRPC", "HTTP+JSON", "GRPC"];

let checks = 0;
const failures = [];
function check(ok, what, detail) {
  checks++;
  if (!ok) {
    failures.push(what);
    console.log(`FAIL ${what}${detail === undefined ? "" : ": " + detail}`);
  }
}
const show = (v) => {
  try {
    return JSON.stringify(v, (_, x) => (typeof x === "bigint" ? String(x) : x));
  } catch {
    return String(v);
  }
};

// as returns the request options of a caller ("" = anonymous).
const as = (caller) => (caller ? { serviceParameters: { [callerHeader]: caller } } : {});

const text = (t) => ({ content: { $case: "text", value: t }, metadata: undefined, filename: "", mediaType: "" });
function userMessage(t, extra = {}) {
  return {
    messageId: randomUUID(), contextId: "", taskId: "", role: Role.ROLE_USER, parts: [text(t)],
    metadata: undefined, extensions: [], referenceTaskIds: [], ...extra,
  };
}
const sendRequest = (message, configuration) => ({ tenant: "", message, configuration, metadata: undefined });
const listRequest = (r) => ({ tenant: "", contextId: "", status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: "", statusTimestampAfter: undefined, ...r });

// failure runs f and returns the error it throws (undefined: none).
async function failure(f) {
  try {
    await f();
  } catch (err) {
    return err;
  }
  return undefined;
}
const errName = (err) => (err ? err.name : "no error");

// drain reads a stream's events (at most limit).
async function drain(stream, limit = 100) {
  const events = [];
  for await (const ev of stream) {
    events.push(ev);
    if (events.length >= limit) break;
  }
  return events;
}

async function main() {
  // Agent card.
  const cardResp = await fetch(base + "/.well-known/agent-card.json");
  check(cardResp.ok, "agent card answers 200", cardResp.status);
  const card = await cardResp.json();
  const bindings = (card.supportedInterfaces || []).map((i) => i.protocolBinding).sort();
  check(show(bindings) === show([...transports].sort()), "agent card lists the three transports", show(card.supportedInterfaces));
  check(card.capabilities && card.capabilities.streaming === true, "agent card declares streaming", show(card.capabilities));
  check(!card.capabilities.pushNotifications, "agent card declares no push notifications", show(card.capabilities));
  // Caching (A2A §8.6.1): max-age, ETag, Last-Modified; a revalidation is 304.
  const etag = cardResp.headers.get("etag");
  check(/max-age=\d+/.test(cardResp.headers.get("cache-control") || "") && etag && cardResp.headers.get("last-modified"),
    "agent card has Cache-Control max-age, ETag and Last-Modified", show([...cardResp.headers]));
  const revalidated = await fetch(base + "/.well-known/agent-card.json", { headers: { "If-None-Match": etag } });
  check(revalidated.status === 304, "agent card revalidated with its ETag is 304", revalidated.status);

  // One client per transport, from the card.
  const clients = {};
  for (const tr of transports) {
    const factory = new ClientFactory({
      transports: [new JsonRpcTransportFactory(), new RestTransportFactory(), new GrpcTransportFactory()],
      preferredTransports: [tr],
    });
    clients[tr] = await factory.createFromUrl(base);
    check(clients[tr].transport.protocolName === tr, `client for ${tr} uses ${tr}`, clients[tr].transport.protocolName);
  }

  // Sends: alice creates 7 tasks in one context over the three
  // transports, bob 2 in another.
  const ctxA = "interop-" + randomUUID(), ctxB = "interop-" + randomUUID();
  const alice = [], bob = [];
  for (let i = 0; i < 7; i++) {
    const tr = transports[i % 3];
    const task = await clients[tr].sendMessage(sendRequest(userMessage(`alice ${i}`, { contextId: ctxA })), as("alice"));
    check(task && task.id && task.status && task.status.state === TaskState.TASK_STATE_COMPLETED, `send over ${tr} completes a task`, show(task && task.status));
    check(task.contextId === ctxA, `send over ${tr} keeps the context`, task.contextId);
    alice.push(task.id);
  }
  for (let i = 0; i < 2; i++) {
    const task = await clients[transports[i]].sendMessage(sendRequest(userMessage(`bob ${i}`, { contextId: ctxB })), as("bob"));
    bob.push(task.id);
  }

  // Get, on every transport, of every task; owner isolation.
  for (const tr of transports) {
    for (const id of alice) {
      const got = await clients[tr].getTask({ tenant: "", id, historyLength: undefined }, as("alice"));
      check(got.id === id && got.contextId === ctxA, `get over ${tr}`, show(got.id));
    }
    const h0 = await clients[tr].getTask({ tenant: "", id: alice[0], historyLength: 0 }, as("alice"));
    check(!h0.history || h0.history.length === 0, `get over ${tr} with historyLength 0 has no history`, h0.history && h0.history.length);
    const err = await failure(() => clients[tr].getTask({ tenant: "", id: alice[0], historyLength: undefined }, as("bob")));
    check(errName(err) === "TaskNotFoundError", `get of alice's task as bob over ${tr} is TaskNotFoundError`, errName(err));
    const missing = await failure(() => clients[tr].getTask({ tenant: "", id: randomUUID(), historyLength: undefined }, as("alice")));
    check(errName(missing) === "TaskNotFoundError", `get of a missing task over ${tr} is TaskNotFoundError`, errName(missing));
  }

  // Traversals: page size 2, on one transport and switching on every page.
  async function traverse(pick, req, caller) {
    const seen = [];
    let token = "", total = -1;
    for (let page = 0; page < 50; page++) {
      const tr = pick(page);
      const resp = await clients[tr].listTasks(listRequest({ ...req, pageToken: token }), as(caller));
      total = resp.totalSize;
      for (const t of resp.tasks) seen.push(t.id);
      token = resp.nextPageToken;
      if (!token) break;
    }
    return { seen, total };
  }
  const want = show([...alice].sort());
  for (const [name, pick] of [
    ...transports.map((tr) => [tr, () => tr]),
    ["switching transport on every page", (p) => transports[p % 3]],
  ]) {
    const { seen, total } = await traverse(pick, { contextId: ctxA, pageSize: 2 }, "alice");
    check(show([...seen].sort()) === want, `traversal over ${name} returns each of alice's tasks once`, show(seen));
    check(total === alice.length, `traversal over ${name} totalSize`, total);
  }
  for (const tr of transports) {
    // Owner isolation: bob lists only his, alice's context is empty to him.
    const { seen } = await traverse(() => tr, { pageSize: 100 }, "bob");
    check(show([...seen].sort()) === show([...bob].sort()), `bob's list over ${tr} holds only bob's tasks`, show(seen));
    const other = await clients[tr].listTasks(listRequest({ contextId: ctxA }), as("bob"));
    check(other.tasks.length === 0 && other.totalSize === 0, `bob's list of alice's context over ${tr} is empty`, other.totalSize);

    // Filters.
    const done = await clients[tr].listTasks(listRequest({ contextId: ctxA, status: TaskState.TASK_STATE_COMPLETED }), as("alice"));
    check(done.totalSize === alice.length, `status filter completed over ${tr}`, done.totalSize);
    const canceled = await clients[tr].listTasks(listRequest({ contextId: ctxA, status: TaskState.TASK_STATE_CANCELED }), as("alice"));
    check(canceled.totalSize === 0, `status filter canceled over ${tr}`, canceled.totalSize);
    const future = await clients[tr].listTasks(listRequest({ contextId: ctxA, statusTimestampAfter: "2999-01-01T00:00:00Z" }), as("alice"));
    check(future.totalSize === 0 && future.tasks.length === 0, `statusTimestampAfter in the future over ${tr}`, future.totalSize);
    const past = await clients[tr].listTasks(listRequest({ contextId: ctxA, statusTimestampAfter: "2000-01-01T00:00:00Z" }), as("alice"));
    check(past.totalSize === alice.length, `statusTimestampAfter in the past over ${tr}`, past.totalSize);

    // Invalid arguments.
    for (const [what, req] of [
      ["an invalid page token", { contextId: ctxA, pageToken: "not-a-token" }],
      ["page size -1", { contextId: ctxA, pageSize: -1 }],
      ["page size 101", { contextId: ctxA, pageSize: 101 }],
    ]) {
      const err = await failure(() => clients[tr].listTasks(listRequest(req), as("alice")));
      check(isInvalidParams(tr, err), `list with ${what} over ${tr} is invalid params`, errDetail(err));
    }
    // No identity: unauthenticated.
    const anon = await failure(() => clients[tr].listTasks(listRequest({}), as("")));
    check(isUnauthenticated(tr, anon), `anonymous list over ${tr} is unauthenticated`, errDetail(anon));
  }

  // Cancel: a held task is canceled (again: the same answer, cancel is
  // idempotent); a completed task is not cancelable; bob cannot cancel
  // alice's.
  for (const tr of transports) {
    const held = await clients[tr].sendMessage(sendRequest(userMessage("hold"), { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: true }), as("alice"));
    check(held.status.state !== TaskState.TASK_STATE_COMPLETED, `held task over ${tr} is not finished`, held.status.state);
    const byBob = await failure(() => clients[tr].cancelTask({ tenant: "", id: held.id, metadata: undefined }, as("bob")));
    check(errName(byBob) === "TaskNotFoundError", `cancel of alice's task as bob over ${tr} is TaskNotFoundError`, errName(byBob));
    const canceled = await clients[tr].cancelTask({ tenant: "", id: held.id, metadata: undefined }, as("alice"));
    check(canceled.status.state === TaskState.TASK_STATE_CANCELED, `cancel over ${tr}`, canceled.status.state);
    const again = await clients[tr].cancelTask({ tenant: "", id: held.id, metadata: undefined }, as("alice"));
    check(again.status.state === TaskState.TASK_STATE_CANCELED, `second cancel over ${tr} answers the canceled task`, again.status.state);
    const done = await failure(() => clients[tr].cancelTask({ tenant: "", id: alice[0], metadata: undefined }, as("alice")));
    check(errName(done) === "TaskNotCancelableError", `cancel of a completed task over ${tr} is TaskNotCancelableError`, errDetail(done));
  }

  // Streams: a streamed message ends completed; a subscription to a held
  // task starts with the task and ends when another transport cancels it.
  for (const tr of transports) {
    const events = await drain(clients[tr].sendMessageStream(sendRequest(userMessage("stream")), as("alice")));
    const last = events[events.length - 1];
    check(events.length >= 2 && events[0].payload && events[0].payload.$case === "task", `stream over ${tr} starts with the task`, show(events[0]));
    check(last && last.payload && last.payload.$case === "statusUpdate" && last.payload.value.status.state === TaskState.TASK_STATE_COMPLETED,
      `stream over ${tr} ends completed`, show(last && last.payload));

    const held = await clients[tr].sendMessage(sendRequest(userMessage("hold"), { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: true }), as("alice"));
    const bobSub = await failure(() => drain(clients[tr].resubscribeTask({ tenant: "", id: held.id }, as("bob"))));
    check(errName(bobSub) === "TaskNotFoundError", `subscribe to alice's task as bob over ${tr} is TaskNotFoundError (W7)`, errDetail(bobSub));
    const sub = clients[tr].resubscribeTask({ tenant: "", id: held.id }, as("alice"));
    const first = await sub.next();
    check(!first.done && first.value.payload.$case === "task" && first.value.payload.value.id === held.id, `subscribe over ${tr} starts with the task`, show(first.value));
    const other = transports[(transports.indexOf(tr) + 1) % 3];
    await clients[other].cancelTask({ tenant: "", id: held.id, metadata: undefined }, as("alice"));
    const rest = [];
    for (let ev = await sub.next(); !ev.done; ev = await sub.next()) rest.push(ev.value);
    const end = rest[rest.length - 1];
    check(end && end.payload.$case === "statusUpdate" && end.payload.value.status.state === TaskState.TASK_STATE_CANCELED,
      `subscription over ${tr} ends canceled after a cancel over ${other}`, show(rest));

    // W6: the task is finished now; subscribing again is
    // UnsupportedOperationError, thrown, not an empty stream (W7).
    const finished = await failure(() => drain(clients[tr].resubscribeTask({ tenant: "", id: held.id }, as("alice"))));
    check(errName(finished) === "UnsupportedOperationError", `subscribe to a finished task over ${tr} is UnsupportedOperationError (W6)`, errDetail(finished));
    const missing = await failure(() => drain(clients[tr].resubscribeTask({ tenant: "", id: randomUUID() }, as("alice"))));
    check(errName(missing) === "TaskNotFoundError", `subscribe to a missing task over ${tr} is TaskNotFoundError (W7)`, errDetail(missing));
    const anon = await failure(() => drain(clients[tr].resubscribeTask({ tenant: "", id: held.id }, as(""))));
    check(isUnauthenticated(tr, anon), `anonymous subscribe over ${tr} is unauthenticated (W7)`, errDetail(anon));
    const anonStream = await failure(() => drain(clients[tr].sendMessageStream(sendRequest(userMessage("who")), as(""))));
    check(isUnauthenticated(tr, anonStream), `anonymous stream over ${tr} is unauthenticated (W7)`, errDetail(anonStream));
    const intoBob = await failure(() => drain(clients[tr].sendMessageStream(sendRequest(userMessage("mine", { taskId: bob[0] })), as("alice"))));
    check(errName(intoBob) === "TaskNotFoundError", `stream into bob's task as alice over ${tr} is TaskNotFoundError (W7)`, errDetail(intoBob));
  }

  // Version negotiation (W8): the SDK's client always sends A2A-Version
  // 1.0 (the server's a2astore_protocol_version_calls_total shows it; see
  // TestInteropJS) and overrides any other value given to it, so the
  // refusal is checked through its transports, which send the service
  // parameters they are given: VersionNotSupportedError on every
  // transport, for a stream too (W7).
  for (const tr of transports) {
    const v99 = { serviceParameters: { [callerHeader]: "alice", "A2A-Version": "99.0" } };
    const sent = await failure(() => clients[tr].transport.sendMessage(sendRequest(userMessage("v99")), v99));
    check(errName(sent) === "VersionNotSupportedError", `send with A2A-Version 99.0 over ${tr} is VersionNotSupportedError`, errDetail(sent));
    const streamed = await failure(() => drain(clients[tr].transport.sendMessageStream(sendRequest(userMessage("v99")), v99)));
    check(errName(streamed) === "VersionNotSupportedError", `stream with A2A-Version 99.0 over ${tr} is VersionNotSupportedError (W7)`, errDetail(streamed));
    const patch = await clients[tr].transport.sendMessage(sendRequest(userMessage("v1.0.1")), { serviceParameters: { [callerHeader]: "alice", "A2A-Version": "1.0.1" } });
    check(patch && patch.id, `send with A2A-Version 1.0.1 over ${tr} is served (the patch number is ignored)`, show(patch));
  }

  // Push notifications are not declared: every push-config call is
  // PushNotificationNotSupportedError (A2A §3.3.4), whatever task it names
  // and whoever asks — not TaskNotFoundError for a task the caller cannot
  // see. The SDK's Client refuses create, get and list itself when the card
  // declares no push (delete it sends), so the server's answer is checked
  // through the Client and through its transport, which always sends.
  for (const tr of transports) {
    for (const [who, id, caller] of [["own", alice[0], "alice"], ["another's", alice[0], "bob"], ["a missing", randomUUID(), "alice"]]) {
      const direct = { serviceParameters: { [callerHeader]: caller, "A2A-Version": "1.0" } };
      for (const [op, method, params] of [
        ["create", "createTaskPushNotificationConfig", { tenant: "", id: "cfg-1", taskId: id, url: "https://example.com/hook", token: "", authentication: undefined }],
        ["get", "getTaskPushNotificationConfig", { tenant: "", taskId: id, id: "cfg-1" }],
        ["list", "listTaskPushNotificationConfig", { tenant: "", taskId: id, pageSize: 0, pageToken: "" }],
        ["delete", "deleteTaskPushNotificationConfig", { tenant: "", taskId: id, id: "cfg-1" }],
      ]) {
        const viaClient = await failure(() => clients[tr][method](params, as(caller)));
        check(errName(viaClient) === "PushNotificationNotSupportedError", `push config ${op} on ${who} task over ${tr} is PushNotificationNotSupportedError`, errDetail(viaClient));
        const viaTransport = await failure(() => clients[tr].transport[method](params, direct));
        check(errName(viaTransport) === "PushNotificationNotSupportedError", `push config ${op} on ${who} task sent over ${tr} is the server's PushNotificationNotSupportedError`, errDetail(viaTransport));
      }
    }
  }

  // W10: an invalid-params error carries its A2A reason on every transport,
  // so the SDK classifies it (its name for INVALID_PARAMS is
  // RequestMalformedError): GetTask with historyLength -1, refused over gRPC
  // by GRPCRequestValidator, whose status had no ErrorInfo before.
  for (const tr of transports) {
    const err = await failure(() => clients[tr].getTask({ tenant: "", id: alice[0], historyLength: -1 }, as("alice")));
    check(isInvalidParams(tr, err) && errName(err) === "RequestMalformedError", `get with historyLength -1 over ${tr} is the SDK's invalid-params error (W10)`, errDetail(err));
  }

  // SendMessage's historyLength (A2A §3.2.4) applies to the task it returns.
  for (const tr of transports) {
    const none = await clients[tr].sendMessage(sendRequest(userMessage("h0"), { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: 0, returnImmediately: false }), as("alice"));
    check(none && (!none.history || none.history.length === 0), `send with historyLength 0 over ${tr} returns no history`, show(none && none.history));
    const one = await clients[tr].sendMessage(sendRequest(userMessage("h1"), { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: 1, returnImmediately: false }), as("alice"));
    check(one && one.history && one.history.length === 1, `send with historyLength 1 over ${tr} returns one history message`, show(one && one.history));
  }

  console.log(`${checks - failures.length}/${checks} interop checks passed`);
  return failures.length === 0;
}

// errDetail describes an error for a failure line.
function errDetail(err) {
  if (!err) return "no error";
  return `${err.name} ${show({ envelopeCode: err.envelopeCode, statusCode: err.statusCode, status: err.status, message: err.message })}`;
}

// isInvalidParams: JSON-RPC -32602, HTTP 400, gRPC INVALID_ARGUMENT (W3).
function isInvalidParams(tr, err) {
  if (!err) return false;
  switch (tr) {
    case "JSONRPC": return err.envelopeCode === -32602;
    case "HTTP+JSON": return err.statusCode === 400;
    default: return err.status === 3;
  }
}

// isUnauthenticated: a2a-go's -31401 (the A2A v1.0 spec defines no
// JSON-RPC code for it), HTTP 401, gRPC UNAUTHENTICATED.
function isUnauthenticated(tr, err) {
  if (!err) return false;
  switch (tr) {
    case "JSONRPC": return err.envelopeCode === -31401;
    case "HTTP+JSON": return err.statusCode === 401;
    default: return err.status === 16;
  }
}

main().then(
  (ok) => process.exit(ok ? 0 : 1),
  (err) => {
    console.log(`FAIL interop script stopped: ${err && err.stack ? err.stack : err}`);
    process.exit(1);
  },
);
