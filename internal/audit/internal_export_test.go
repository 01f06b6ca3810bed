package audit

// SearchFrom is searchFrom, for the tests of package audit_test.
var SearchFrom = searchFrom
