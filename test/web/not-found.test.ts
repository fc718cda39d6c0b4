// A wrong link in the browser lands on the console's 404 page, as in Forgejo;
// scripts and clients asking the same URL (no `Accept: text/html`), and any
// URL under /api/, keep the API's JSON 404.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer } from '../support/server.ts';

const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

for (const dialect of testDialects()) {
  describe(`unknown URLs [${dialect}]`, () => {
    let s: TestServer;
    before(async () => {
      s = await startTestServer(dialect);
    });
    after(async () => {
      await s?.stop();
    });

    test('a browser asking for an unknown page gets the HTML 404 page, with the console security headers', async () => {
      const res = await fetch(`${s.url}/alice/app/no/such/page?x=%3Cscript%3E`, {
        headers: { accept: BROWSER_ACCEPT },
      });
      assert.equal(res.status, 404);
      assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
      assert.match(res.headers.get('content-security-policy') ?? '', /script-src 'self'/);
      assert.equal(res.headers.get('x-frame-options'), 'DENY');
      const html = await res.text();
      assert.match(html, /<h1>404<\/h1>/);
      assert.match(html, /does not exist/);
      assert.match(html, /href="\/user\/login"/);
      assert.ok(!html.includes('<script>'), 'the URL is not echoed into the page');
    });

    test('the same URL from a client without Accept: text/html, and unknown /api/ URLs from a browser, get JSON', async () => {
      for (const [url, accept] of [
        ['/alice/app/no/such/page', '*/*'],
        ['/api/v1/no/such/endpoint', BROWSER_ACCEPT],
        ['/api/actions/no.such.Service/Call', BROWSER_ACCEPT],
      ] as const) {
        const res = await fetch(`${s.url}${url}`, { headers: { accept } });
        assert.equal(res.status, 404, url);
        assert.match(res.headers.get('content-type') ?? '', /^application\/json/, url);
        const body = (await res.json()) as { message?: string; url?: string };
        assert.equal(body.message, "The target couldn't be found.", url);
      }
    });

    test('a POST to an unknown URL gets JSON even from a browser', async () => {
      const res = await fetch(`${s.url}/alice/app/no/such/form`, {
        method: 'POST',
        headers: { accept: BROWSER_ACCEPT, 'content-type': 'application/x-www-form-urlencoded' },
        body: 'a=1',
      });
      assert.equal(res.status, 404);
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    });
  });
}
