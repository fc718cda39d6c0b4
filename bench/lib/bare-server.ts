// The baseline: a node:http server answering every request with the same status,
// headers and bytes as the endpoint under test. No framework, no database.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface BareServer {
  url: string;
  close(): Promise<void>;
}

export async function startBareServer(
  body: Buffer,
  headers: Record<string, string>,
  status = 200,
): Promise<BareServer> {
  const responseHeaders: Record<string, string> =
    status === 204 ? { ...headers } : { ...headers, 'content-length': String(body.length) };
  const server = http.createServer((req, res) => {
    // Read the request body (a PUT's) as a real endpoint must, then answer.
    req.resume();
    req.on('end', () => {
      res.writeHead(status, responseHeaders);
      res.end(status === 204 ? undefined : body);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | null = null;
  return {
    url: `http://127.0.0.1:${port}`,
    close(): Promise<void> {
      closing ??= new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
