// The anchor for bench/storage.sh: the official Azure SDK for JavaScript
// (@azure/storage-blob, from node_modules) uploading and downloading the same
// file against the same Azurite, with the same block size and parallelism as
// `gantry storage put/get`. Times only the transfer (the client is built
// before the clock starts), as gantry's --json "seconds" does.
//
// Two download modes: "get" is BlobClient.downloadToFile (one streamed GET;
// the SDK has no parallel download to a file) and "getpar" is
// BlockBlobClient.downloadToBuffer (ranged GETs of blockSize, `concurrency` at
// a time) followed by writing the buffer to FILE, the SDK's parallel path.
//
// usage: node bench/storage_sdk.mjs put|get|getpar CONNECTION_STRING CONTAINER BLOB FILE BLOCK_BYTES PARALLELISM
// prints one JSON line: {"op":"put","bytes":N,"seconds":S,"mb_per_s":M}
import { createRequire } from "node:module";
import { statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(join(root, "package.json"));
const { BlobServiceClient } = require("@azure/storage-blob");

const [op, conn, containerName, blobName, file, blockArg, parArg] = process.argv.slice(2);
if (!["put", "get", "getpar"].includes(op) || !file) {
  console.error("usage: storage_sdk.mjs put|get|getpar CONN CONTAINER BLOB FILE BLOCK_BYTES PARALLELISM");
  process.exit(2);
}
const blockSize = Number(blockArg || 8 * 1024 * 1024);
const concurrency = Number(parArg || 8);

const service = BlobServiceClient.fromConnectionString(conn);
const container = service.getContainerClient(containerName);
await container.createIfNotExists();
const blob = container.getBlockBlobClient(blobName);

const t0 = process.hrtime.bigint();
let bytes;
if (op === "put") {
  bytes = statSync(file).size;
  // Files above maxSingleShotSize go up as blocks of blockSize, `concurrency` at a time.
  await blob.uploadFile(file, { blockSize, concurrency, maxSingleShotSize: blockSize });
} else if (op === "get") {
  await blob.downloadToFile(file);
  bytes = statSync(file).size;
} else {
  const buf = await blob.downloadToBuffer(0, undefined, { blockSize, concurrency });
  writeFileSync(file, buf);
  bytes = buf.length;
}
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(JSON.stringify({ op, bytes, seconds, mb_per_s: bytes / seconds / 1e6 }));
