// pgjdbc runs queue-design.md's two flows against cubequeue; prints "OK" on success.
// Usage: java -cp /usr/share/java/postgresql.jar:<dir> QueueFlow <host> <port> <prefix>
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

public class QueueFlow {
    static final long TIMEOUT_MS = 60000;

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    static Connection connect(String url) throws SQLException {
        Properties props = new Properties();
        props.setProperty("user", "cube");
        props.setProperty("sslmode", "disable");
        return DriverManager.getConnection(url, props);
    }

    static String blockingResult(Connection w, String path) throws SQLException {
        try (PreparedStatement ps = w.prepareStatement("QUEUE RESULT_BLOCKING ? ?")) {
            ps.setLong(1, TIMEOUT_MS);
            ps.setString(2, path);
            try (ResultSet rs = ps.executeQuery()) {
                check(rs.next(), "RESULT_BLOCKING returned no row");
                return rs.getString("payload") + "|" + rs.getString("type") + "|" + rs.getString("id");
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://" + args[0] + ":" + args[1] + "/cube";
        String prefix = args[2];
        String path = prefix + ":job";
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try (Connection c = connect(url); Connection w = connect(url)) {
            // connect ran SET extra_float_digits and SET application_name
            try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SHOW application_name")) {
                check(rs.next() && rs.getString(1).equals("PostgreSQL JDBC Driver"), "application_name");
            }
            try (PreparedStatement ps = c.prepareStatement("QUEUE RESULT ?")) {
                ps.setString(1, path);
                try (ResultSet rs = ps.executeQuery()) { check(!rs.next(), "no result yet"); }
            }
            String id;
            try (PreparedStatement ps = c.prepareStatement("QUEUE ADD PRIORITY ? ? ?")) {
                ps.setLong(1, 1);
                ps.setString(2, path);
                ps.setString(3, "{\"a\":1}");
                try (ResultSet rs = ps.executeQuery()) {
                    check(rs.next(), "ADD row");
                    id = rs.getString("id");
                    check(rs.getBoolean("added"), "added");
                    check(rs.getLong("pending") == 1, "pending");
                }
            }
            try (PreparedStatement ps = c.prepareStatement("QUEUE LIST ?")) {
                ps.setString(1, prefix);
                try (ResultSet rs = ps.executeQuery()) {
                    check(rs.next() && rs.getString("id").equals("job") && rs.getString("status").equals("pending"), "LIST");
                    check(!rs.next(), "one item");
                }
            }
            Future<String> blocked = pool.submit(() -> blockingResult(w, path));
            try (PreparedStatement ps = c.prepareStatement("QUEUE RETRIEVE EXTENDED CONCURRENCY ? ?")) {
                ps.setLong(1, 2);
                ps.setString(2, path);
                try (ResultSet rs = ps.executeQuery()) {
                    check(rs.next() && rs.getString("payload").equals("{\"a\":1}") && rs.getString("id").equals(id), "RETRIEVE");
                }
            }
            // setLong on a key slot: an id (dialect doc §8 rule 5)
            try (PreparedStatement ps = c.prepareStatement("QUEUE MERGE_EXTRA ? ?")) {
                ps.setLong(1, Long.parseLong(id));
                ps.setString(2, "{\"stage\":\"run\"}");
                ps.execute();
            }
            try (PreparedStatement ps = c.prepareStatement("QUEUE HEARTBEAT ?")) {
                ps.setString(1, path);
                ps.execute();
            }
            try (PreparedStatement ps = c.prepareStatement("QUEUE ACK ? ?")) {
                ps.setString(1, path);
                ps.setString(2, "the result");
                try (ResultSet rs = ps.executeQuery()) { check(rs.next() && rs.getBoolean(1), "ACK"); }
            }
            String got = blocked.get(60, TimeUnit.SECONDS);
            check(got.equals("the result|success|" + id), "RESULT_BLOCKING: " + got);

            // fast track, with autoCommit=false (BEGIN pipelined with the first statement)
            String fast = prefix + ":fast";
            c.setAutoCommit(false);
            try (PreparedStatement ps = c.prepareStatement("QUEUE ADD_AND_RETRIEVE ? ? ?")) {
                ps.setString(1, fast);
                ps.setString(2, "pl");
                ps.setLong(3, 1);
                try (ResultSet rs = ps.executeQuery()) {
                    check(rs.next() && "pl".equals(rs.getString("payload")), "ADD_AND_RETRIEVE");
                }
            }
            c.commit();
            c.setAutoCommit(true);
            try (PreparedStatement ps = c.prepareStatement("QUEUE ACK ? ?")) {
                ps.setString(1, fast);
                ps.setString(2, "ok");
                ps.execute();
            }
            check(blockingResult(c, fast).startsWith("ok|success|"), "fast track result");

            // many executions of one statement: past prepareThreshold (5) it is named
            try (PreparedStatement ps = c.prepareStatement("QUEUE GET ?")) {
                for (int i = 0; i < 8; i++) {
                    ps.setString(1, path + "-missing");
                    try (ResultSet rs = ps.executeQuery()) { check(!rs.next(), "GET missing"); }
                }
            }
            // errors keep the connection usable
            try (Statement st = c.createStatement()) {
                st.execute("QUEUE NOPE");
                check(false, "expected an error");
            } catch (SQLException e) {
                check("42601".equals(e.getSQLState()), "42601: " + e.getSQLState());
            }
            try (Statement st = c.createStatement();
                 ResultSet rs = st.executeQuery("SELECT created, status FROM system.queue WHERE prefix = '" + prefix + "'")) {
                check(!rs.next(), "queue is empty after ACK");
            }
        } finally {
            pool.shutdownNow();
        }
        System.out.println("OK");
    }
}
