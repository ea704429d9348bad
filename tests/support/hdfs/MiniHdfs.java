import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * An HDFS mini-cluster (a name node and a data node in this JVM) for the tests of exports and
 * outputs on a remote file system: args are its base folder and name-node port (0: any free
 * one). Prints "HDFS ready at hdfs://localhost:PORT" once it serves, then runs until killed.
 */
public final class MiniHdfs {
  private MiniHdfs() {}

  public static void main(String[] args) throws Exception {
    Configuration conf = new Configuration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, args[0]);
    conf.setBoolean("dfs.permissions.enabled", false);
    MiniDFSCluster cluster =
        new MiniDFSCluster.Builder(conf)
            .numDataNodes(1)
            .nameNodePort(Integer.parseInt(args[1]))
            .format(true)
            .build();
    cluster.waitActive();
    System.out.println("HDFS ready at hdfs://localhost:" + cluster.getNameNodePort());
    System.out.flush();
    Thread.currentThread().join();
  }
}
