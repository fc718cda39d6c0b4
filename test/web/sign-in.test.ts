// Signing in to the web console as a user would, in a real Chromium: user
// name or e-mail, the forced password change, sign-out, the failed-login
// limiter, and the session cookie's and pages' security headers.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { launchBrowser, openPage, signIn } from '../support/browser.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';

for (const dialect of testDialects()) {
  describe(`web console: sign in [${dialect}]`, () => {
    let s: TestServer;
    let browser: Browser;
    let alice: TestUser;

    before(async () => {
      [s, browser] = await Promise.all([startTestServer(dialect, { GANTRY_LOGIN_MAX_FAILURES: '3' }), launchBrowser()]);
      alice = await s.createUser('alice');
      const repo = await s.api('POST', '/user/repos', { token: alice.token, body: { name: 'shop', private: true } });
      assert.equal(repo.status, 201, repo.text);
    });
    after(async () => {
      await browser?.close();
      await s?.stop();
    });

    test('a user signs in with their name, sees their repositories, and signs out', async () => {
      const t = await openPage(browser, s.url);
      try {
        await t.page.goto('/');
        assert.equal(await t.page.getByText('alice/shop').count(), 0, 'a private repository is not shown signed out');
        await signIn(t.page, 'alice', alice.password);
        await t.page.getByText('Signed in as').waitFor();
        await t.page.getByRole('link', { name: 'alice/shop' }).waitFor();
        const cookies = await t.context.cookies();
        const session = cookies.find((c) => c.name === 'gantry_session');
        assert.ok(session, 'a session cookie');
        assert.equal(session.httpOnly, true);
        assert.equal(session.sameSite, 'Lax');
        assert.equal(session.secure, false, 'not Secure on an http root URL');
        await t.screenshot('sign-in-home');
        await t.page.getByRole('button', { name: 'Sign out' }).click();
        await t.page.getByRole('button', { name: 'Sign in' }).waitFor();
        // The old cookie no longer signs anyone in.
        const again = await fetch(`${s.url}/`, { headers: { cookie: `gantry_session=${session.value}` } });
        assert.doesNotMatch(await again.text(), /Signed in as/);
      } finally {
        await t.close();
      }
    });

    test('a user signs in with their e-mail address; pages send a strict Content-Security-Policy', async () => {
      const t = await openPage(browser, s.url);
      try {
        await signIn(t.page, 'alice@example.com', alice.password);
        await t.page.getByText('Signed in as').waitFor();
        const response = await t.page.goto('/');
        const csp = response?.headers()['content-security-policy'] ?? '';
        assert.match(csp, /default-src 'self'/);
        assert.match(csp, /script-src 'self'(;|$)/, 'no inline scripts');
        assert.deepEqual(t.consoleErrors, []);
        await t.screenshot('sign-in-email');
      } finally {
        await t.close();
      }
    });

    test('must_change_password leads to the change-password page before anything else', async () => {
      const user = await s.server.deps.services.accounts.createUser({
        username: 'newbie',
        email: 'newbie@example.com',
        password: 'first-password-1',
        mustChangePassword: true,
      });
      const t = await openPage(browser, s.url);
      try {
        await signIn(t.page, user.name, 'first-password-1');
        await t.page.getByRole('heading', { name: 'Change password' }).waitFor();
        await t.page.goto('/');
        await t.page.getByRole('heading', { name: 'Change password' }).waitFor();
        await t.page.getByLabel('New password', { exact: true }).fill('second-password-2');
        await t.page.getByLabel('Confirm the new password').fill('second-password-2');
        await t.page.getByRole('button', { name: 'Update password' }).click();
        await t.page.getByText('Your password has been changed.').waitFor();
        await t.screenshot('sign-in-changed-password');
        const fresh = await s.server.deps.services.accounts.findByName('newbie');
        assert.equal(fresh?.mustChangePassword, false);
      } finally {
        await t.close();
      }
    });

    test('wrong passwords are refused, then the failed-login limiter locks the name (429)', async () => {
      const t = await openPage(browser, s.url);
      try {
        for (let i = 0; i < 3; i += 1) {
          await signIn(t.page, 'alice', 'not-the-password');
          await t.page.getByText('Invalid user name, e-mail or password.').waitFor();
        }
        await t.page.getByLabel('Username or e-mail address').fill('alice');
        await t.page.getByLabel('Password', { exact: true }).fill(alice.password);
        const [response] = await Promise.all([
          t.page.waitForResponse((r) => r.url().endsWith('/user/login') && r.request().method() === 'POST'),
          t.page.getByRole('button', { name: 'Sign in' }).click(),
        ]);
        assert.equal(response.status(), 429);
        await t.page.getByText(/too many failed sign-ins/).waitFor();
        await t.screenshot('sign-in-locked');
      } finally {
        await t.close();
      }
    });

    test('a sign-in POST without the CSRF token is refused', async () => {
      const t = await openPage(browser, s.url);
      try {
        await t.page.goto('/user/login');
        const forged = await t.context.request.post('/user/login', {
          form: { user_name: 'alice', password: alice.password },
          maxRedirects: 0,
        });
        assert.equal(forged.status(), 403);
        assert.equal(forged.headers()['set-cookie']?.includes('gantry_session=') ?? false, false);
        await t.page.setContent(await forged.text());
        await t.screenshot('sign-in-forged');
      } finally {
        await t.close();
      }
    });
  });
}
