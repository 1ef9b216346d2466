import { describe, expect, test } from "bun:test"
import {
  compilePattern,
  findCodeowners,
  locations,
  matchingRule,
  ownersOf,
  parseCodeowners
} from "../../src/flaky/codeowners.ts"

// GitHub's documentation example ("About code owners"), verbatim apart from being concatenated
const GITHUB_EXAMPLE = `# This is a comment.
# Each line is a file pattern followed by one or more owners.

# These owners will be the default owners for everything in
# the repo. Unless a later match takes precedence,
# @global-owner1 and @global-owner2 will be requested for
# review when someone opens a pull request.
*       @global-owner1 @global-owner2

# Order is important; the last matching pattern takes the most
# precedence. When someone opens a pull request that only
# modifies JS files, only @js-owner and not the global
# owner(s) will be requested for a review.
*.js    @js-owner #This is an inline comment.

# You can also use email addresses if you prefer. They'll be
# used to look up users just like we do for commit author
# emails.
*.go docs@example.com

# Teams can be specified as code owners as well. Teams should
# be identified in the format @org/team-name. Teams must have
# explicit write access to the repository. In this example,
# the octocats team in the octo-org organization owns all .txt files.
*.txt @octo-org/octocats

# In this example, @doctocat owns any files in the build/logs
# directory at the root of the repository and any of its
# subdirectories.
/build/logs/ @doctocat

# The \`docs/*\` pattern will match files like
# \`docs/getting-started.md\` but not further nested files like
# \`docs/build-app/troubleshooting.md\`.
docs/* docs@example.com

# In this example, @octocat owns any file in an apps directory
# anywhere in your repository.
apps/ @octocat

# In this example, @doctocat owns any file in the \`/docs\`
# directory in the root of your repository and any of its
# subdirectories.
/docs/ @doctocat

# In this example, any change inside the \`/scripts\` directory
# will require approval from @doctocat or @octocat.
/scripts/ @doctocat @octocat

# In this example, @octocat owns any file in a \`/logs\` directory such as
# \`/build/logs\`, \`/scripts/logs\`, and \`/deeply/nested/logs\`. Any changes
# in a \`/logs\` directory will require approval from @octocat.
**/logs @octocat

# In this example, @octocat owns any file in the \`/apps\`
# directory in the root of your repository except for the \`/apps/github\`
# subdirectory, as its owners are left empty. Without an owner, changes
# to \`apps/github\` can be made with the approval of any user who has
# write access to the repository.
/apps/ @octocat
/apps/github

# In this example, @octocat owns any file in the \`/apps\`
# directory in the root of your repository except for the \`/apps/github\`
# subdirectory, as this subdirectory has its own owner @doctocat
/apps/ @octocat
/apps/github @doctocat
`

const matches = (pattern: string, path: string): boolean => compilePattern(pattern).test(path)

describe("CODEOWNERS: GitHub documentation example", () => {
  const co = parseCodeowners(GITHUB_EXAMPLE)
  const cases: Array<[string, string[]]> = [
    ["README.md", ["@global-owner1", "@global-owner2"]],
    ["src/deep/index.js", ["@js-owner"]],
    ["cmd/main.go", ["docs@example.com"]],
    ["notes/todo.txt", ["@octo-org/octocats"]],
    // /build/logs/ matches, but **/logs comes later
    ["build/logs/today.log", ["@octocat"]],
    ["scripts/logs/x.txt", ["@octocat"]],
    ["deeply/nested/logs/a/b.txt", ["@octocat"]],
    // docs/* matches, but /docs/ comes later
    ["docs/getting-started.md", ["@doctocat"]],
    ["docs/build-app/troubleshooting.md", ["@doctocat"]],
    // docs/* is anchored (slash in the middle): nested docs dirs fall back to *
    ["src/docs/readme.md", ["@global-owner1", "@global-owner2"]],
    ["scripts/deploy.sh", ["@doctocat", "@octocat"]],
    // apps/ matches at any depth, after *.js
    ["lib/apps/index.js", ["@octocat"]],
    ["apps/web/index.js", ["@octocat"]],
    ["apps/github/hook.rb", ["@doctocat"]]
  ]
  for (const [path, owners] of cases) {
    test(`${path} → ${owners.join(" ")}`, () => {
      expect([...ownersOf(co, path)]).toEqual(owners)
    })
  }

  test("comments and blank lines are not rules; the inline comment is stripped", () => {
    expect(co.rules.length).toBe(14)
    expect(co.errors).toEqual([])
    expect(co.rules[1]).toMatchObject({ pattern: "*.js", owners: ["@js-owner"], line: 14 })
  })

  test("a matching line without owners means no owners", () => {
    const first = parseCodeowners("* @everyone\n/apps/ @octocat\n/apps/github\n")
    expect([...ownersOf(first, "apps/github/x.rb")]).toEqual([])
    expect(matchingRule(first, "apps/github/x.rb")?.line).toBe(3)
    expect([...ownersOf(first, "apps/other/x.rb")]).toEqual(["@octocat"])
    expect([...ownersOf(first, "README")]).toEqual(["@everyone"])
  })

  test("no matching line: no owners", () => {
    expect([...ownersOf(parseCodeowners("/docs/ @a\n"), "src/x.ts")]).toEqual([])
  })
})

describe("CODEOWNERS patterns", () => {
  test("* does not cross / but a slashless pattern matches at any depth", () => {
    expect(matches("*.js", "a.js")).toBe(true)
    expect(matches("*.js", "a/b/c.js")).toBe(true)
    expect(matches("/*.js", "a.js")).toBe(true)
    expect(matches("/*.js", "a/b.js")).toBe(false)
    expect(matches("src/*.ts", "src/a.ts")).toBe(true)
    expect(matches("src/*.ts", "src/a/b.ts")).toBe(false)
    expect(matches("*", "a/b/c")).toBe(true)
    expect(matches("a?c", "x/abc")).toBe(true)
    expect(matches("a?c", "x/a/c")).toBe(false)
  })

  test("dir/* is not recursive; dir/ and /dir/ are", () => {
    expect(matches("docs/*", "docs/a.md")).toBe(true)
    expect(matches("docs/*", "docs/b/c.md")).toBe(false)
    expect(matches("docs/*", "x/docs/a.md")).toBe(false)
    expect(matches("apps/", "apps/a")).toBe(true)
    expect(matches("apps/", "x/y/apps/a/b")).toBe(true)
    expect(matches("apps/", "apps")).toBe(false)
    expect(matches("apps/", "myapps/a")).toBe(false)
    expect(matches("/build/logs/", "build/logs/a/b")).toBe(true)
    expect(matches("/build/logs/", "x/build/logs/a")).toBe(false)
  })

  test("leading / and a middle slash anchor; a plain name covers a directory's contents", () => {
    expect(matches("/README", "README")).toBe(true)
    expect(matches("/README", "docs/README")).toBe(false)
    expect(matches("README", "docs/README")).toBe(true)
    expect(matches("src/lib", "src/lib/a/b.ts")).toBe(true)
    expect(matches("src/lib", "x/src/lib/a.ts")).toBe(false)
    expect(matches("/apps/github", "apps/github/x")).toBe(true)
    expect(matches("/apps/github", "apps/githubber")).toBe(false)
  })

  test("** patterns", () => {
    expect(matches("**/logs", "logs/a")).toBe(true)
    expect(matches("**/logs", "a/b/logs/c")).toBe(true)
    expect(matches("**/logs", "a/blogs/c")).toBe(false)
    expect(matches("a/**/b", "a/b")).toBe(true)
    expect(matches("a/**/b", "a/x/y/b/c")).toBe(true)
    expect(matches("a/**/b", "x/a/b")).toBe(false)
    expect(matches("foo/**", "foo/a/b")).toBe(true)
    expect(matches("foo/**", "bar/foo/a")).toBe(false)
    expect(matches("/docs/**/*.md", "docs/a/b/c.md")).toBe(true)
    expect(matches("/docs/**/*.md", "docs/c.md")).toBe(true)
    expect(matches("/docs/**/*.md", "docs/c.txt")).toBe(false)
  })

  test("escapes: \\# and \\ (space)", () => {
    const co = parseCodeowners("\\#file_with_pound.rb @pound\npath\\ with\\ spaces/ @space # comment\n")
    expect([...ownersOf(co, "#file_with_pound.rb")]).toEqual(["@pound"])
    expect([...ownersOf(co, "path with spaces/a.txt")]).toEqual(["@space"])
    expect(co.rules.length).toBe(2)
  })

  test("CRLF, tabs, ./ and leading / in paths, negation is an error", () => {
    const co = parseCodeowners("*\t@a\t@b\r\n!*.md @c\r\n/x/ @x\r\n")
    expect(co.errors.map((e) => e.line)).toEqual([2])
    expect([...ownersOf(co, "./x/y")]).toEqual(["@x"])
    expect([...ownersOf(co, "/x/y")]).toEqual(["@x"])
    expect([...ownersOf(co, "a.md")]).toEqual(["@a", "@b"])
  })

  test("locations: the first found wins", async () => {
    expect([...locations]).toEqual([".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS"])
    const files: Record<string, string> = { CODEOWNERS: "* @root", "docs/CODEOWNERS": "* @docs" }
    const found = await findCodeowners((p) => files[p])
    expect(found?.path).toBe("CODEOWNERS")
    expect([...ownersOf(found?.codeowners ?? parseCodeowners(""), "a")]).toEqual(["@root"])
    files[".github/CODEOWNERS"] = "* @gh"
    expect((await findCodeowners(async (p) => files[p]))?.path).toBe(".github/CODEOWNERS")
    expect(await findCodeowners(() => undefined)).toBeUndefined()
  })
})
